#!/usr/bin/env bash
# The GPU round in one run: MFU beside transformers' Trainer, the GPU tests, and the end-to-end
# pipeline at the base recipes through Dagster (training stages launched through Pipes) with the
# transfer table, in at most GPU_ROUND_SECONDS (default 510) of wall time.
#
#   OUT=results benchmarks/gpu_round.sh          # on a machine with a CUDA GPU
#   OUT=results benchmarks/gpu_round.sh --dry    # the same steps at toy size on a CPU (the test suite runs this)
#
# Everything is written under $OUT as it happens, so a run stopped at its time limit keeps what
# it finished (8 files: round.log, mfu.jsonl, mfu.log, pytest_gpu.log, e2e.log, stages.csv,
# training.csv, leaderboard.md):
#   1. the end-to-end run's data stages (clean, tokenizers, token stores, datasets: CPU work)
#      start in the background on a corpus larger than the demo (the standard library's and
#      several installed packages' docstrings), while
#   2. benchmarks/mfu.py times GPT-2 124M and BERT-base, compiled, ours and the Trainer's (the GPU
#      to itself: nothing else uses it meanwhile);
#   3. then the end-to-end run's training stages (every architecture pretrained for a short budget,
#      fine-tuned, and fine-tuned from scratch as the control), evaluate and report, while
#      `pytest -m gpu` runs beside it with a per-test time limit (with GPU_ROUND_MFU_LAST=1 the
#      MFU runs of 2. come after these instead, the GPU again theirs alone);
#   4. stages.csv (each Dagster step's time), training.csv (each finished training: its timings,
#      a fine-tuning's test accuracy) and leaderboard.md (the transfer table).
# Parameters reach the pipeline through --set only: the project's params.yaml is never rewritten.
# Packages the GPU machine lacks can come as a folder of wheels (GPU_ROUND_WHEELS): the round installs
# those whose distribution is not there already. Then, before anything runs, every module the round
# imports is looked up (GPU_ROUND_NEEDS adds names): one that is missing stops the round at once,
# with its name.
# The scratch project lives in GPU_ROUND_WORK (default /tmp/lmforge-gpu-round), made by this
# script (a folder there that this script did not make is refused).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DRY=0
case "${1:-}" in
  --dry) DRY=1 ;;
  "") ;;
  *) echo "usage: OUT=DIR $0 [--dry]" >&2; exit 2 ;;
esac
if [ -z "${OUT:-}" ]; then echo "gpu_round.sh: set OUT to the folder for the results" >&2; exit 2; fi
PY="${PYTHON:-python3}"
BUDGET="${GPU_ROUND_SECONDS:-510}"
WORK="${GPU_ROUND_WORK:-/tmp/lmforge-gpu-round}"
# which parts run: mfu, tests, e2e (= data, then train). GPU_ROUND_PHASES=e2e on the same machine
# goes on with an end-to-end run that was stopped at the time limit (the finished stages are up to
# date and are not redone); GPU_ROUND_PHASES=data on a CPU machine prepares GPU_ROUND_WORK, and
# GPU_ROUND_PHASES=train with that folder carried to the GPU machine runs only the stages after
# the data ones there (their inputs are the carried files; the corpus is not read again)
PHASES=",${GPU_ROUND_PHASES:-mfu,tests,e2e},"
has() { [[ "$PHASES" == *",$1,"* ]] || { [[ "$1" == data || "$1" == train ]] && [[ "$PHASES" == *",e2e,"* ]]; }; }
export PYTHONPATH="$REPO/src:$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
T0=$(date +%s)

elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( BUDGET - $(elapsed) )); }
log() { echo "[gpu_round +$(elapsed)s] $*" | tee -a "$OUT/round.log" >&2; }
# the time a phase may take: what it asks, at most what is left less a reserve for the report
allow() { local want=$1 reserve=${2:-20} room; room=$(( $(left) - reserve )); [ "$room" -lt "$want" ] && want=$room; [ "$want" -lt 1 ] && want=1; echo "$want"; }

# ---------------------------------------------------------------- sizes: the GPU's or the toy's
# the MFU runs (mfu.py's names): GPT-2 with its vocabulary padded to a multiple of 64 and no
# dropout, at WIDE_BATCH sequences a step (the fifth try's best: 64), compiled, then its compiled
# step replayed as CUDA graphs (the fifth try's profile: 6% of the step had no kernel running),
# beside the Trainer; GPU_ROUND_GPT_RUNS adds runs at GPT-2's own batch of 32; BERT-base only when
# asked. Each run's last PROFILE_STEPS steps (after its timed ones) run under torch.profiler: its
# top kernels go into mfu.jsonl
MFU_GPT_RUNS="${GPU_ROUND_GPT_RUNS-}"
MFU_GPT_WIDE_RUNS="${GPU_ROUND_GPT_WIDE_RUNS-ours-compiled+pad+nodrop,ours-cudagraphs+pad+nodrop,hf-compiled+pad+nodrop}"
MFU_BERT_RUNS="${GPU_ROUND_BERT_RUNS-}"
PROFILE_STEPS=${GPU_ROUND_PROFILE_STEPS:-3}
# the pretrainings' budget in wall-clock minutes (train.budget_minutes), each capped at
# PRETRAIN_STEPS steps; trainings share the GPU, SHARE at once (orchestrate.trainings_per_gpu):
# at the base sizes on 128-token examples one training leaves most of an H100 idle
if [ "$DRY" = 1 ]; then
  MFU_ARGS=(--device-check)  # the same runs, each eager (see mfu.py)
  WIDE_BATCH=${GPU_ROUND_WIDE_BATCH:-4}; PYTEST_WORKERS=0
  FINETUNE_LR=${GPU_ROUND_FINETUNE_LR:-}  # the tiny recipes' own rate
  SIZE=tiny; ACCEL=cpu; PRETRAIN_STEPS=4; FINETUNE_STEPS=4; MINUTES=2; SHARE=1; WARMUP=1
  EXECUTOR=in_process  # on two cores a process per step only costs start-ups (the GPU runs use multiprocess)
  ARCHS="[gpt]"
  CORPUS=(--set clean.include_site_packages=false --set clean.workers=2 --set "tokenizer.kinds=[bpe]"
          --set "dataset.objectives=[clm]")
else
  MFU_ARGS=(--warmup 8 --steps 20 --workers 4)
  WIDE_BATCH=${GPU_ROUND_WIDE_BATCH:-64}; PYTEST_WORKERS=${GPU_ROUND_PYTEST_WORKERS:-4}
  SIZE=base; ACCEL=gpu; PRETRAIN_STEPS=${GPU_ROUND_PRETRAIN_STEPS:-100000}; FINETUNE_STEPS=${GPU_ROUND_FINETUNE_STEPS:-120}
  MINUTES=${GPU_ROUND_PRETRAIN_MINUTES:-1.5}; SHARE=${GPU_ROUND_SHARE:-10}; WARMUP=50; EXECUTOR=multiprocess
  # the base recipes fine-tune at 3e-5 for 3,000 steps; in a round's few hundred steps at that rate
  # the from-scratch controls stayed on the majority class (a control too weak to compare against)
  FINETUNE_LR=${GPU_ROUND_FINETUNE_LR:-1e-4}
  ARCHS="[gpt,bert,albert,ernie,elmo,transformer_xl,xlnet,bart,t5,switch]"
  CORPUS=(--set "clean.include_site_packages=[numpy,scipy,sklearn,pandas,torch,sympy,networkx]" --set clean.workers=6
          --set tokenizer.max_training_documents=20000)
fi
SETS=(--set "train.size=$SIZE" --set "train.accelerator=$ACCEL" --set "train.architectures=$ARCHS"
      --set "train.budget_minutes=$MINUTES" --set "train.max_steps=$PRETRAIN_STEPS" --set "train.finetune_max_steps=$FINETUNE_STEPS"
      --set train.threads=1 --set train.checkpoint_every=100000
      --set tracking.enabled=false --set orchestrate.dvc_commit=false --set orchestrate.training_process=subprocess
      --set orchestrate.executor=$EXECUTOR --set orchestrate.max_concurrent=$(( SHARE + 2 ))
      --set "orchestrate.trainings_per_gpu=$SHARE"
      --set evaluate.validation_batches=50 "${CORPUS[@]}")
# each recipe's warmup and validation scaled to the short budget (the base recipes warm up for 10,000 steps)
for arch in gpt bert albert ernie elmo transformer_xl xlnet bart t5 switch; do
  r="pipelines/$arch.yaml:sizes.$SIZE"
  SETS+=(--set "$r.pretrain.warmup_steps=$WARMUP" --set "$r.pretrain.eval_every=$PRETRAIN_STEPS"
         --set "$r.pretrain.eval_batches=20" --set "$r.finetune.warmup_steps=0" --set "$r.finetune.warmup_ratio=0.1"
         --set "$r.finetune.eval_every=$(( FINETUNE_STEPS / 3 + 1 ))" --set "$r.finetune.eval_batches=10")
  [ -n "$FINETUNE_LR" ] && SETS+=(--set "$r.finetune.learning_rate=$FINETUNE_LR")
done
# the encoder-decoders classify with their encoder and a mean-pooled head (EncT5's reading): no
# answers generated for the test split, which took BART's control 68 s in the last round
for arch in bart t5 switch; do
  SETS+=(--set "pipelines/$arch.yaml:finetune.mode=classification" --set "pipelines/$arch.yaml:finetune.pooling=mean")
done

log "repo $REPO, out $OUT, work $WORK, budget ${BUDGET}s, dry=$DRY"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$PY" -c "import sys, torch, lightning, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'lightning', lightning.__version__, 'transformers', transformers.__version__); print('gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None)"
  nproc
} >> "$OUT/round.log" 2>&1

# ---------------------------------------------------------------- 1. the scratch project, its data stages
if [ -e "$WORK" ] && [ ! -f "$WORK/.gpu_round" ]; then
  log "error: $WORK exists and was not made by this script; set GPU_ROUND_WORK to a new folder"
  exit 2
fi
mkdir -p "$WORK/dagster" && touch "$WORK/.gpu_round"

# packages carried as wheels (GPU_ROUND_WHEELS, a folder of them): those of a distribution the
# machine already has are left out (its own stay as they are), the others are installed into
# $WORK/site, which goes on PYTHONPATH for every process of the round
if [ -n "${GPU_ROUND_WHEELS:-}" ]; then
  shopt -s nullglob
  mapfile -t WHEELS < <("$PY" - "$GPU_ROUND_WHEELS"/*.whl <<'EOF'
import importlib.metadata, re, sys
from pathlib import Path
for wheel in sys.argv[1:]:
    name = re.sub(r"[-_.]+", "-", Path(wheel).name.split("-")[0]).lower()
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        print(wheel)
EOF
  )
  ALL=("$GPU_ROUND_WHEELS"/*.whl)
  shopt -u nullglob
  log "wheels: ${#WHEELS[@]} of ${#ALL[@]} in $GPU_ROUND_WHEELS to install (the others' packages are here already)"
  if [ "${#WHEELS[@]}" -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "${WHEELS[@]}" \
      >> "$OUT/round.log" 2>&1 || { log "error: the wheels did not install (round.log)"; exit 2; }
  fi
  export PYTHONPATH="$PYTHONPATH:$WORK/site"
fi

# ---------------------------------------------------------------- what the round imports, checked first
# a module missing on the GPU machine (a package not carried) is found here, in seconds, not when
# the stages and the tests reach it (the fifth try lost its training stages to dvc and pycld2)
NEEDS=(dagster dagster_pipes dvc pycld2 mlflow seqeval rouge_score sacrebleu lightning transformers tokenizers
       filelock xxhash pydantic yaml pandas pyarrow sklearn scipy safetensors fsspec matplotlib pytest_timeout)
[ "$PYTEST_WORKERS" -gt 0 ] && NEEDS+=(xdist)
# shellcheck disable=SC2206
NEEDS+=(${GPU_ROUND_NEEDS:-})
MISSING=$("$PY" -c 'import importlib.util, sys; print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))' \
  "${NEEDS[@]}") || MISSING="(the check itself failed)"
if [ -n "$MISSING" ]; then
  log "error: $PY cannot import: $MISSING (carry the packages as wheels); nothing was run"
  exit 2
fi

PROJECT="$WORK/project"
[ -f "$PROJECT/params.yaml" ] || "$PY" -m lmforge.cli init "$PROJECT" >> "$OUT/e2e.log" 2>&1 || { log "error: lmforge init failed (e2e.log)"; exit 1; }
cp "$REPO/dagster_project/dagster.yaml" "$WORK/dagster/dagster.yaml"
DATA_ASSETS=$(cd "$PROJECT" && "$PY" - "${SETS[@]}" <<'EOF'
import sys
from lmforge.config import load_params
from lmforge.stages import build_stages
overrides = [a for a in sys.argv[1:] if a != "--set"]
graph = build_stages(load_params("params.yaml", overrides), root=".")
print(",".join(s.name for s in graph if s.kind in ("clean", "tokenizer", "tokens", "dataset")))
print(",".join(s.name for s in graph if s.kind == "pretrain"))
print(",".join(s.name for s in graph if s.kind not in ("clean", "tokenizer", "tokens", "dataset")))
EOF
) || { log "error: the parameters or the stage graph are wrong (see above)"; exit 2; }
PRETRAIN_ASSETS=$(sed -n 2p <<< "$DATA_ASSETS"); TRAIN_ASSETS=$(sed -n 3p <<< "$DATA_ASSETS"); DATA_ASSETS=$(sed -n 1p <<< "$DATA_ASSETS")
e2e() {  # a Dagster run of the scratch project, its output appended to e2e.log
  (cd "$PROJECT" && LMFORGE_PROJECT="$PROJECT" DAGSTER_HOME="$WORK/dagster" "$PY" -m dagster_project.run "$@" "${SETS[@]}") >> "$OUT/e2e.log" 2>&1
}
DATA_PID=""
if has data; then
  log "e2e: data stages start in the background: $DATA_ASSETS"
  e2e --select "$DATA_ASSETS" &
  DATA_PID=$!
fi

# ---------------------------------------------------------------- 2. MFU, the GPU to itself
mfu() {  # model, runs, seconds wanted, then mfu.py's own options
  local model=$1 runs=$2 limit
  limit=$(allow "$3" "$MFU_AFTER")
  shift 3
  log "mfu: $model ($runs $*), at most ${limit}s"
  timeout -k 10 "$limit" "$PY" "$REPO/benchmarks/mfu.py" --model "$model" --runs "$runs" "${MFU_ARGS[@]}" \
    --profile-steps "$PROFILE_STEPS" "$@" --json "$OUT/mfu.jsonl" >> "$OUT/mfu.log" 2>&1
  log "mfu: $model exit $?"
}
mfu_runs() {
  [ -n "$MFU_GPT_RUNS" ] && mfu gpt2 "$MFU_GPT_RUNS" 100
  [ -n "$MFU_GPT_WIDE_RUNS" ] && mfu gpt2 "$MFU_GPT_WIDE_RUNS" 230 --batch "$WIDE_BATCH"
  [ -n "$MFU_BERT_RUNS" ] && mfu bert-base "$MFU_BERT_RUNS" 110
}
# GPU_ROUND_MFU_LAST=1: the training stages first, each phase of them leaving GPU_ROUND_MFU_RESERVE
# seconds (default 200) of the budget to the MFU runs after them (the GPU theirs alone once the
# training stages and the tests are done)
MFU_LAST=${GPU_ROUND_MFU_LAST:-0}
TRAIN_RESERVE=25 MFU_AFTER=200  # seconds kept for what follows: after the training stages, after an MFU run
if has mfu && [ "$MFU_LAST" = 1 ]; then TRAIN_RESERVE=$(( 25 + ${GPU_ROUND_MFU_RESERVE:-200} )) MFU_AFTER=15; fi
if has mfu && [ "$MFU_LAST" != 1 ]; then mfu_runs; fi

# ---------------------------------------------------------------- 3. training stages, with pytest -m gpu beside them
if [ -n "$DATA_PID" ]; then
  log "e2e: waiting for the data stages"
  wait "$DATA_PID"; DATA_RC=$?
  log "e2e: data stages exit $DATA_RC"
fi
TEST_PID=""
if has tests; then
  limit=$(allow 240 30)
  WORKERS=(); [ "$PYTEST_WORKERS" -gt 0 ] && WORKERS=(-n "$PYTEST_WORKERS")
  log "pytest -m gpu: at most ${limit}s, 100 s per test, ${PYTEST_WORKERS} workers"
  # SIGINT at the limit: pytest then stops as on Ctrl-C and still prints its summary line
  (cd "$REPO" && timeout -s INT -k 20 "$limit" "$PY" -m pytest -m gpu tests/training/test_gpu.py -p no:cacheprovider \
     -o addopts= -q -rA --timeout 100 "${WORKERS[@]}" > "$OUT/pytest_gpu.log" 2>&1; echo "pytest exit $?" >> "$OUT/pytest_gpu.log") &
  TEST_PID=$!
fi
if has train; then
  REST=(); has data || REST=(--select "$TRAIN_ASSETS")  # the carried data stages are not run again
  # every pretraining first (Dagster's own order starts with the from-scratch fine-tunings, which
  # need no pretraining: a time limit would then leave no pretrained model), then the rest; with
  # GPU_ROUND_PRETRAIN_FIRST=0 one run does it all (when the slots hold every pretraining and
  # every control at once, nothing waits, and one run's start-up is saved)
  if [ "${GPU_ROUND_PRETRAIN_FIRST:-1}" = 1 ]; then
    limit=$(allow 600 $TRAIN_RESERVE)
    log "e2e: pretraining stages ($PRETRAIN_ASSETS), at most ${limit}s"
    timeout -k 15 "$limit" bash -c "$(declare -f e2e); $(declare -p SETS PROJECT WORK OUT PY); e2e --select '$PRETRAIN_ASSETS'"
    log "e2e: pretraining exit $?"
  fi
  limit=$(allow 600 $TRAIN_RESERVE)
  log "e2e: the training stages left (fine-tuning, the from-scratch controls), evaluate, report, at most ${limit}s"
  timeout -k 15 "$limit" bash -c "$(declare -f e2e); $(declare -p SETS PROJECT WORK OUT PY REST); e2e \"\${REST[@]}\""
  log "e2e: exit $?"
fi
if [ -n "$TEST_PID" ]; then
  wait "$TEST_PID"
  log "pytest -m gpu: $(grep -E '(passed|failed|skipped|error)' "$OUT/pytest_gpu.log" | tail -1)"
fi

if has mfu && [ "$MFU_LAST" = 1 ]; then
  log "mfu: after the training stages and the tests"
  mfu_runs
fi

# ---------------------------------------------------------------- 4. what the run did
"$PY" "$REPO/benchmarks/gpu_round_report.py" --dagster-home "$WORK/dagster" --project "$PROJECT" --out "$OUT" \
  2>&1 | tee -a "$OUT/round.log" >&2
log "done"
