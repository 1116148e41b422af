#!/usr/bin/env bash
# Build lmforge's images from this checkout with podman and try each one: the CPU image
# (docker/Dockerfile) and the CUDA image (docker/Dockerfile.cuda). No container is started:
# every command runs inside the image's root file system (podman create + podman mount, then
# chroot as the image's own user, with the image's environment and entry point), so it works
# where a container runtime cannot (cgroups, no registry), on the host's loopback network.
#
#   sudo docker/try_images.sh                 # both images on a local Debian stand-in base
#   sudo docker/try_images.sh --only cpu
#   sudo docker/try_images.sh --registry      # the Dockerfiles' own bases (python:3.11-slim,
#                                             # nvidia/cuda) and torch indexes: needs a registry
#
# Per image: the build (timed), its size, no compiler and (CPU image) no CUDA build of torch;
# then as the image's user: `lmforge --version`, `lmforge init` and a one-architecture slice of
# `lmforge run` in a scratch folder, logging to the MLflow server the compose file starts (its
# basic-auth app: unauthenticated requests refused, the admin account accepted), the entry
# point refusing the placeholder password, the Dagster definitions loaded, the code server,
# webserver and daemon started, answering on 127.0.0.1 and stopped; every socket they listen
# on is on the loopback and owned by that user. For the CPU image, a rebuild after a change to
# the code must take every dependency layer from the cache.
#
# Without --registry the bases are a Debian bookworm made by mmdebstrap (python3 3.11) and
# imported as localhost/lmforge-base:bookworm (made once, kept), and both images get torch's
# CPU build (the CUDA image is checked for everything but its CUDA libraries). A folder holding
# a torch-*+cpu wheel (--torch-wheels, or the first such folder of $PIP_FIND_LINKS) is mounted
# into the builds; $PIP_CERT (a CA bundle) is passed to pip in the builds when set.
#
# Needs root (chroot, mounts), podman, unshare, chroot, curl, ss, python3 and, for the stand-in
# base, mmdebstrap. Exit status: 0 every step passed, 1 a step failed, 2 bad usage or a missing
# tool. The images stay (localhost/lmforge-try:cpu, :cuda); everything else it made is removed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE_TAG="localhost/lmforge-base:bookworm"
TRY_REPO="localhost/lmforge-try"
DEADLINE_S="${TRY_IMAGES_DEADLINE_S:-240}"   # per server: how long it may take to answer
RUN_TIMEOUT_S="${TRY_IMAGES_RUN_TIMEOUT_S:-1200}"

die() { echo "try_images: $*" >&2; exit 2; }
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
  echo "options: --only cpu|cuda   --registry   --base IMAGE   --torch-wheels DIR   --no-cache   --skip-cache-check   -h|--help"
}

only="" registry=0 base="" torch_wheels="" no_cache=0 cache_check=1
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || die "--only needs cpu or cuda"; only="$2"; shift 2 ;;
    --registry) registry=1; shift ;;
    --base) [ $# -ge 2 ] || die "--base needs an image name"; base="$2"; shift 2 ;;
    --torch-wheels) [ $# -ge 2 ] || die "--torch-wheels needs a folder"; torch_wheels="$2"; shift 2 ;;
    --no-cache) no_cache=1; shift ;;
    --skip-cache-check) cache_check=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (--help lists the options)" ;;
  esac
done
case "$only" in ""|cpu|cuda) ;; *) die "--only takes cpu or cuda, not '$only'" ;; esac
[ "$registry" = 1 ] && [ -n "$base" ] && die "--registry and --base exclude each other"
[ "$(id -u)" = 0 ] || die "needs root (chroot and mounts): run it with sudo"
for tool in podman unshare chroot setsid curl ss python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (Debian: apt-get install podman util-linux coreutils curl iproute2 python3)"
done
if [ -n "$torch_wheels" ]; then
  [ -d "$torch_wheels" ] || die "--torch-wheels $torch_wheels: no such folder"
  compgen -G "$torch_wheels/torch-*+cpu-*.whl" >/dev/null || die "--torch-wheels $torch_wheels: holds no torch-*+cpu-*.whl"
  torch_wheels="$(cd "$torch_wheels" && pwd)"
elif [ "$registry" = 0 ]; then
  IFS=' ' read -r -a _links <<< "${PIP_FIND_LINKS:-}"
  for dir in "${_links[@]}"; do
    dir="${dir#file://}"
    if [ -d "$dir" ] && compgen -G "$dir/torch-*+cpu-*.whl" >/dev/null; then torch_wheels="$(cd "$dir" && pwd)"; break; fi
  done
fi
if [ -n "${PIP_CERT:-}" ] && [ ! -f "$PIP_CERT" ]; then die "PIP_CERT=$PIP_CERT: no such file"; fi

# ------------------------------------------------------------------ scratch, cleanup
scratch="$(mktemp -d "${TMPDIR:-/tmp}/lmforge-try.XXXXXX")"
containers=()     # created here: removed on exit
groups=()         # process groups of the servers started here: stopped on exit
made_images=()    # throwaway images made here (not the lmforge-try ones): removed on exit
mounted_images=() # images mounted here: unmounted on exit
stop_group() {    # stop_group PGID: TERM, then KILL after 20 s
  local pgid="$1" i
  kill -TERM -- "-$pgid" 2>/dev/null || return 0
  for i in $(seq 1 40); do kill -0 -- "-$pgid" 2>/dev/null || return 0; sleep 0.5; done
  kill -KILL -- "-$pgid" 2>/dev/null || true
}
cleanup() {
  local rc=$? g c i
  for g in "${groups[@]}"; do stop_group "$g"; done
  for c in "${containers[@]}"; do
    podman umount "$c" >/dev/null 2>&1 || true
    podman rm -f "$c" >/dev/null 2>&1 || true
  done
  for i in "${mounted_images[@]}"; do podman image umount "$i" >/dev/null 2>&1 || true; done
  for i in "${made_images[@]}"; do podman rmi "$i" >/dev/null 2>&1 || true; done
  rm -rf -- "$scratch"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ reporting
failures=0
summary=()
step() { echo; echo "== $*"; }
pass() { echo "PASS $*"; summary+=("PASS $*"); }
fail() { echo "FAIL $*" >&2; summary+=("FAIL $*"); failures=$((failures + 1)); }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f MiB", b / 1048576 }'; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for DESCRIPTION PGID COMMAND...: run COMMAND every second until it succeeds (0), the
# server's process group is gone (1) or DEADLINE_S has passed (1)
wait_for() {
  local what="$1" pgid="$2" start
  shift 2
  start=$(date +%s)
  while :; do
    if "$@" >/dev/null 2>&1; then echo "   $what: answered after $(( $(date +%s) - start )) s"; return 0; fi
    if ! kill -0 -- "-$pgid" 2>/dev/null; then echo "   $what: the server exited" >&2; return 1; fi
    if [ $(( $(date +%s) - start )) -ge "$DEADLINE_S" ]; then echo "   $what: no answer within ${DEADLINE_S} s" >&2; return 1; fi
    sleep 1
  done
}

http_code() {  # http_code URL [curl options]: the status code, 000 when nothing answered
  local url="$1"; shift
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" "$url" || true
}

# ------------------------------------------------------------------ the stand-in base
if [ "$registry" = 0 ] && [ -z "$base" ]; then
  base="$BASE_TAG"
  if ! podman image exists "$base"; then
    command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing (apt-get install mmdebstrap), or pass --base IMAGE or --registry"
    step "base: $base (mmdebstrap bookworm, minbase, python3 python3-venv ca-certificates)"
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$scratch/base.tar" \
      || { echo "try_images: mmdebstrap failed" >&2; exit 1; }
    podman import --quiet "$scratch/base.tar" "$base" >/dev/null
    rm -f "$scratch/base.tar"
  fi
fi

# ------------------------------------------------------------------ context
bases="$base"; [ "$registry" = 1 ] && bases="the Dockerfiles' own"
echo "try_images: $REPO, bases: $bases, torch wheels: ${torch_wheels:-none, the PyTorch index}"
step "build context: $REPO (.dockerignore applied)"
# what COPY . receives is measured in the CPU image's /project below; here, the checkout beside it
echo "   checkout on disk: $(du -sh --exclude=.git "$REPO" | cut -f1) (without .git)"

# ------------------------------------------------------------------ build
build_args() {  # the podman build arguments of image KIND (cpu | cuda)
  local kind="$1"
  args=(--isolation chroot --network host --layers)
  [ "$no_cache" = 1 ] && args+=(--no-cache)
  if [ -n "$base" ]; then
    if [ "$kind" = cpu ]; then args+=(--build-arg "BASE_IMAGE=$base"); else args+=(--build-arg "CUDA_IMAGE=$base"); fi
  fi
  if [ -n "$torch_wheels" ]; then
    args+=(--volume "$torch_wheels:$torch_wheels:ro" --build-arg "TORCH_WHEELS=$torch_wheels"
           --build-arg "TORCH_INDEX_URL=https://pypi.org/simple")
  elif [ "$registry" = 0 ] && [ "$kind" = cuda ]; then
    args+=(--build-arg "TORCH_CUDA=cpu")   # the stand-in checks everything but the CUDA libraries
  fi
  if [ -n "${PIP_CERT:-}" ]; then
    args+=(--volume "$PIP_CERT:/run/lmforge-build-ca.crt:ro" --build-arg "PIP_CERT=/run/lmforge-build-ca.crt")
  fi
}

build() {  # build KIND DOCKERFILE TAG CONTEXT LOG: 0 when it built
  local kind="$1" dockerfile="$2" tag="$3" context="$4" log="$5" start
  build_args "$kind"
  start=$(date +%s)
  if podman build "${args[@]}" -f "$context/$dockerfile" -t "$tag" "$context" >"$log" 2>&1; then
    build_s=$(( $(date +%s) - start ))
    return 0
  fi
  build_s=$(( $(date +%s) - start ))
  tail -n 30 "$log" >&2
  return 1
}

# ------------------------------------------------------------------ inside an image
# The root file system of a container created (not started) from the image, mounted writable,
# and the user, uid, gid and environment the image declares.
open_image() {  # open_image TAG: sets ctr, root, user, uid, gid, image_env
  local tag="$1" line
  ctr="$(podman create --name "lmforge-try-$$-$RANDOM" "$tag")"
  containers+=("$ctr")
  root="$(podman mount "$ctr")"
  user="$(podman image inspect --format '{{.Config.User}}' "$tag")"
  user="${user%%:*}"
  image_env=()
  while IFS= read -r line; do [ -n "$line" ] && image_env+=("$line"); done \
    < <(podman image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$tag")
  uid="" gid=""
  if [ -n "$user" ]; then
    IFS=: read -r uid gid <<< "$(awk -F: -v u="$user" '$1 == u || $3 == u { print $3 ":" $4; exit }' "$root/etc/passwd")"
  fi
}

# in_image [-d DIR] [VAR=VALUE ...] -- COMMAND...: COMMAND through the image's entry point, as
# its user, in its environment (plus the VARs), in DIR (default the image's working directory),
# in a mount namespace of its own where /proc, /dev and /sys are mounted (gone when it ends)
in_image() {
  local dir="/project" extra=()
  if [ "${1:-}" = -d ]; then dir="$2"; shift 2; fi
  while [ $# -gt 0 ] && [ "$1" != -- ]; do extra+=("$1"); shift; done
  shift
  unshare --mount --propagation private -- /bin/sh -c '
    root="$1"; spec="$2"; shift 2
    mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" && mount --rbind /sys "$root/sys" || exit 125
    exec chroot --userspec="$spec" "$root" "$@"' sh "$root" "$uid:$gid" \
    /usr/bin/env -i -C "$dir" "${image_env[@]}" "HOME=/home/$user" "USER=$user" "${extra[@]}" \
    /bin/sh /project/docker/entrypoint.sh "$@"
}

# start_in_image LOG [VAR=VALUE ...] -- COMMAND...: in_image in the background, in a process
# group of its own; sets started (its id, also the group's)
start_in_image() {
  local log="$1"; shift
  setsid bash -c "$(declare -f in_image); $(declare -p root uid gid user image_env); in_image \"\$@\"" \
    in_image "$@" >"$log" 2>&1 < /dev/null &
  started=$!
  groups+=("$started")
}

loopback_only() {  # loopback_only PORT...: listening sockets of uid are all on 127.0.0.1, and PORTs among them
  local lines p ok=0
  lines="$(ss -Hltne | grep -E "uid:$uid( |$)" || true)"
  if [ -z "$lines" ]; then echo "   no listening socket owned by uid $uid" >&2; return 1; fi
  # 127.0.0.1, ::1 or 127.0.0.1 on a dual-stack socket (gRPC's)
  local loopback='^(127\.0\.0\.1|\[::1\]|\[::ffff:127\.0\.0\.1\]):[0-9]+$'
  if echo "$lines" | awk '{ print $4 }' | grep -vE "$loopback" >/dev/null; then
    echo "   a socket of uid $uid listens beyond the loopback:" >&2; echo "$lines" >&2; return 1
  fi
  for p in "$@"; do
    echo "$lines" | awk '{ print $4 }' | grep -E ":$p\$" >/dev/null || { echo "   port $p not held by uid $uid" >&2; ok=1; }
  done
  return "$ok"
}

smoke() {  # smoke KIND TAG
  local kind="$1" tag="$2" out rc pw key mlflow_port code_port web_port work="/tmp/lmforge-try"
  open_image "$tag"
  echo "   root file system: $root (container ${ctr:0:12}, writable, removed at the end)"

  # the user
  if [ -n "$uid" ] && [ "$uid" != 0 ] && [ -n "$gid" ]; then
    out="$(in_image -- id -u 2>&1)" || true
    if [ "$out" = "$uid" ]; then pass "$kind: runs as the image's user $user (uid $uid, gid $gid)"
    else fail "$kind: id -u as $user gave '$out'"; return; fi
  else
    fail "$kind: the image declares no non-root user (USER '$user', uid '$uid')"; return
  fi

  # what the image holds
  local tools=() t
  for t in gcc cc g++ c++ make ld; do
    [ -e "$root/usr/bin/$t" ] || [ -e "$root/usr/local/bin/$t" ] && tools+=("$t")
  done
  if [ ${#tools[@]} -eq 0 ]; then pass "$kind: no build tools (gcc, cc, g++, make, ld)"
  else fail "$kind: build tools in the image: ${tools[*]}"; fi
  out="$(in_image -- python -c 'import torch, importlib.metadata as m; print(torch.__version__, torch.version.cuda, len([d for d in m.distributions() if (d.metadata["Name"] or "").startswith("nvidia-")]))' 2>&1)" || true
  echo "   torch: $out (version, CUDA, nvidia-* packages)"
  if [ "$kind" = cpu ] || [ "$registry" = 0 ]; then
    if [[ "$out" == *"+cpu None 0" ]]; then pass "$kind: torch is the CPU build ($out)"; else fail "$kind: torch is not the CPU build: $out"; fi
  else
    if [[ "$out" =~ \ [0-9]+\.[0-9]+\ [0-9]+$ ]]; then pass "$kind: torch is a CUDA build ($out)"; else fail "$kind: torch is not a CUDA build: $out"; fi
  fi
  out="$(in_image -- python -c 'import psycopg2, dagster_postgres, flask_wtf; print("ok")' 2>&1)" || true
  if [ "$out" = ok ]; then pass "$kind: the team extra imports (psycopg2, dagster_postgres, flask_wtf)"
  else fail "$kind: the team extra does not import: $out"; fi
  if [ "$kind" = cpu ]; then
    context_size="$(du -sb "$root/project" | cut -f1)"
    context_files="$(find "$root/project" -type f | wc -l)"
    echo "   /project (what COPY . received of the context): $(mib "$context_size"), $context_files files"
  fi

  # the CLI
  out="$(in_image -- lmforge --version 2>&1)" && [[ "$out" == "lmforge, version "* ]] \
    && pass "$kind: lmforge --version: $out" || fail "$kind: lmforge --version: $out"

  # the entry point refuses the placeholder password
  rc=0; out="$(in_image MLFLOW_TRACKING_PASSWORD=change-me -- true 2>&1)" || rc=$?
  if [ "$rc" = 64 ] && [[ "$out" == *placeholder* ]]; then pass "$kind: the entry point refuses the placeholder password (exit 64)"
  else fail "$kind: the entry point with the placeholder password: exit $rc, '$out'"; fi

  # MLflow as compose.yaml starts it (its command read from the compose file in the image),
  # on stores of its own in sqlite instead of PostgreSQL, on 127.0.0.1
  mkdir -p "$root$work/mlflow" && chown -R "$uid:$gid" "$root$work"
  mlflow_port="$(free_port)"
  pw="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  key="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
  local mlflow_env=(MLFLOW_BACKEND_STORE_URI="sqlite:///$work/mlflow/mlflow.db"
                    MLFLOW_AUTH_DATABASE_URI="sqlite:///$work/mlflow/auth.db"
                    MLFLOW_AUTH_ADMIN_USERNAME=lmforge MLFLOW_AUTH_ADMIN_PASSWORD="$pw"
                    MLFLOW_FLASK_SERVER_SECRET_KEY="$key"
                    MLFLOW_ARTIFACTS_DESTINATION="$work/mlflow/artifacts")
  local mlflow_cmd=()
  while IFS= read -r line; do mlflow_cmd+=("$line"); done < <(in_image "${mlflow_env[@]}" -- python - "$mlflow_port" <<'PY'
import os, re, sys
import yaml
command = yaml.safe_load(open("/project/docker/compose.yaml"))["services"]["mlflow"]["command"]
def resolve(text):  # ${VAR:-default} and ${VAR:?message} from the environment, as compose does
    return re.sub(r"\$\{(\w+)(?::?([-?])([^}]*))?\}",
                  lambda m: os.environ.get(m[1]) or (m[3] if m[2] == "-" else ""), str(text))
command = [resolve(part) for part in command]
command[command.index("--host") + 1] = "127.0.0.1"
command[command.index("--port") + 1] = sys.argv[1]
print("\n".join(command))
PY
  )
  echo "   mlflow: ${mlflow_cmd[*]}"
  if [ "${mlflow_cmd[0]:-}" != mlflow ]; then fail "$kind: could not read the mlflow service's command from compose.yaml"; return; fi
  start_in_image "$scratch/$kind-mlflow.log" "${mlflow_env[@]}" -- "${mlflow_cmd[@]}"
  local mlflow_group=$started base_url="http://127.0.0.1:$mlflow_port"
  if wait_for "MLflow /health" "$mlflow_group" curl -sf --max-time 5 "$base_url/health"; then
    local api="$base_url/api/2.0/mlflow/experiments/search?max_results=1" anon good bad host
    anon="$(http_code "$api")"
    good="$(http_code "$api" -u "lmforge:$pw")"
    bad="$(http_code "$api" -u "lmforge:wrong-$pw")"
    host="$(http_code "$api" -u "lmforge:$pw" -H 'Host: attacker.example')"  # /health is exempt by design
    if [ "$anon" = 401 ] && [ "$good" = 200 ] && [ "$bad" = 401 ] && [ "$host" != 200 ]; then
      pass "$kind: MLflow (basic-auth) answers on 127.0.0.1:$mlflow_port: no credentials 401, admin 200, wrong password 401, admin with a foreign Host header $host"
    else
      fail "$kind: MLflow auth: no credentials $anon, admin $good, wrong password $bad, foreign Host $host (wanted 401 200 401 not-200)"
    fi
  else
    fail "$kind: MLflow did not answer"; tail -n 20 "$scratch/$kind-mlflow.log" >&2
  fi

  # lmforge init and a slice of lmforge run in a scratch folder, logging to that MLflow server
  out="$(in_image -d "$work" -- lmforge init "$work/project" 2>&1)" \
    && [ -f "$root$work/project/params.yaml" ] && pass "$kind: lmforge init $work/project" \
    || fail "$kind: lmforge init: $out"
  local small=(--set train.architectures=[gpt] --set clean.max_documents=400 --set train.max_steps=10
               --set train.finetune_max_steps=5 --set tokenizer.kinds=[bpe] --set tokenize.kinds=[bpe]
               --set dataset.objectives=[clm] --set train.threads=1 --set finetune.scratch_control=false
               --set tracking.uri="$base_url" --set tracking.system_metrics_seconds=null)
  local start=$(date +%s)
  rc=0
  timeout "$RUN_TIMEOUT_S" bash -c "$(declare -f in_image); $(declare -p root uid gid user image_env); in_image \"\$@\"" \
    in_image -d "$work/project" MPLBACKEND=Agg MLFLOW_TRACKING_USERNAME=lmforge MLFLOW_TRACKING_PASSWORD="$pw" \
    -- lmforge run --quiet "${small[@]}" >"$scratch/$kind-run.log" 2>&1 || rc=$?
  local run_s=$(( $(date +%s) - start ))
  if [ "$rc" = 0 ] && grep -q '| gpt | clm | bpe |' "$scratch/$kind-run.log"; then
    local n_runs
    n_runs="$(in_image MLFLOW_TRACKING_USERNAME=lmforge MLFLOW_TRACKING_PASSWORD="$pw" -- python -c '
import sys
from mlflow.tracking import MlflowClient
client = MlflowClient(sys.argv[1])
print(sum(len(client.search_runs([e.experiment_id])) for e in client.search_experiments()))' "$base_url" 2>&1 | tail -n 1)"
    if [[ "$n_runs" =~ ^[1-9][0-9]*$ ]] && [ -f "$root$work/mlflow/mlflow.db" ]; then
      pass "$kind: lmforge run (gpt, 10 steps, 400 documents) in ${run_s} s, the leaderboard row printed, $n_runs MLflow runs logged through basic auth into $work/mlflow/mlflow.db"
    else
      fail "$kind: lmforge run finished in ${run_s} s but the MLflow server's store holds no run: $n_runs"
    fi
  else
    fail "$kind: lmforge run: exit $rc after ${run_s} s"; tail -n 25 "$scratch/$kind-run.log" >&2
  fi

  # Dagster: the definitions load; the code server, webserver and daemon start, answer, stop
  out="$(in_image -- dagster definitions validate -m dagster_project.definitions -d /project 2>&1)" \
    && pass "$kind: dagster definitions validate" \
    || { fail "$kind: dagster definitions validate"; echo "$out" | tail -n 20 >&2; }
  code_port="$(free_port)"; web_port="$(free_port)"
  while [ "$web_port" = "$code_port" ]; do web_port="$(free_port)"; done
  printf 'load_from:\n  - grpc_server:\n      host: 127.0.0.1\n      port: %s\n      location_name: lmforge\n' "$code_port" \
    > "$root$work/workspace.yaml"
  chown "$uid:$gid" "$root$work/workspace.yaml"
  start_in_image "$scratch/$kind-code-server.log" -- dagster code-server start -h 127.0.0.1 -p "$code_port" \
    -m dagster_project.definitions -d /project --location-name lmforge
  local code_group=$started
  if wait_for "code server (grpc-health-check)" "$code_group" in_image -- dagster api grpc-health-check -h 127.0.0.1 -p "$code_port"; then
    pass "$kind: Dagster code server answers on 127.0.0.1:$code_port"
  else
    fail "$kind: Dagster code server"; tail -n 20 "$scratch/$kind-code-server.log" >&2
  fi
  start_in_image "$scratch/$kind-webserver.log" -- dagster-webserver -h 127.0.0.1 -p "$web_port" -w "$work/workspace.yaml"
  local web_group=$started
  start_in_image "$scratch/$kind-daemon.log" -- dagster-daemon run -w "$work/workspace.yaml"
  local daemon_group=$started
  if wait_for "webserver /server_info" "$web_group" curl -sf --max-time 5 "http://127.0.0.1:$web_port/server_info"; then
    local status
    status="$(curl -s --max-time 30 -H 'Content-Type: application/json' \
      -d '{"query": "{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename } } } } }"}' \
      "http://127.0.0.1:$web_port/graphql" \
      | python3 -c 'import json, sys; e = json.load(sys.stdin)["data"]["workspaceOrError"]["locationEntries"]; print(" ".join(x["name"] + "=" + x["locationOrLoadError"]["__typename"] for x in e))' 2>&1 || true)"
    if [ "$status" = "lmforge=RepositoryLocation" ]; then pass "$kind: Dagster webserver answers on 127.0.0.1:$web_port, code location lmforge loaded"
    else fail "$kind: Dagster webserver's code location: $status"; fi
  else
    fail "$kind: Dagster webserver"; tail -n 20 "$scratch/$kind-webserver.log" >&2
  fi
  if wait_for "daemon liveness-check" "$daemon_group" in_image -- dagster-daemon liveness-check; then
    pass "$kind: Dagster daemon alive (dagster-daemon liveness-check)"
  else
    fail "$kind: Dagster daemon"; tail -n 20 "$scratch/$kind-daemon.log" >&2
  fi
  if loopback_only "$mlflow_port" "$code_port" "$web_port"; then
    pass "$kind: every listening socket of uid $uid is on 127.0.0.1 (MLflow, code server, webserver)"
  else
    fail "$kind: listening sockets"
  fi
  local g stopped=0
  for g in "$daemon_group" "$web_group" "$code_group" "$mlflow_group"; do stop_group "$g"; done
  for g in "$daemon_group" "$web_group" "$code_group" "$mlflow_group"; do kill -0 -- "-$g" 2>/dev/null && stopped=1; done
  if [ "$stopped" = 0 ] && ! ss -Hltn | awk '{ print $4 }' | grep -xE "127\.0\.0\.1:($mlflow_port|$code_port|$web_port)" >/dev/null; then
    pass "$kind: the servers stopped, their ports closed"
  else
    fail "$kind: a server outlived its stop"
  fi
}

# the CPU image rebuilt from a copy of the context with one change to the code: every layer of
# the dependencies must come from the cache
cache_check_cpu() {
  local copy="$scratch/context" log="$scratch/cpu-codechange.log" tag="$TRY_REPO:cpu-codechange"
  mkdir -p "$copy"
  (cd "$REPO" && git ls-files -z --cached --others --exclude-standard 2>/dev/null | tar --null -T - -cf -) | tar -xf - -C "$copy"
  [ -f "$copy/src/lmforge/__init__.py" ] || { fail "cpu: cache check: src/lmforge/__init__.py not in the copy"; return; }
  printf '\n# a change to the code (try_images.sh cache check)\n' >> "$copy/src/lmforge/__init__.py"
  if ! build cpu docker/Dockerfile "$tag" "$copy" "$log"; then fail "cpu: rebuild after a code change"; return; fi
  made_images+=("$tag")
  local uncached
  # the steps before the project's own: each must say "--> Using cache" (not pip's "Using cached")
  uncached="$(awk '/STEP [0-9]+\/[0-9]+:/ { if (step != "" && !cached) print step; step = $0; cached = 0 }
                   /^--> Using cache / { cached = 1 }
                   END { if (step != "" && !cached) print step }' "$log" \
              | grep -E 'requirements\.txt|torch==|build-essential|COPY --from=deps|venv' || true)"
  local shared new_bytes
  shared="$(python3 - "$TRY_REPO:cpu" "$tag" <<'PY'
import json, subprocess, sys
layers = [json.loads(subprocess.run(["podman", "image", "inspect", t], check=True, capture_output=True).stdout)[0]["RootFS"]["Layers"] for t in sys.argv[1:]]
same = 0
for a, b in zip(*layers):
    if a != b:
        break
    same += 1
print(same, len(layers[1]))
PY
)"
  # (awk reads to the end: no SIGPIPE for podman under pipefail)
  new_bytes="$(podman history --format '{{.Size}}' "$tag" | awk '$0 != "0 B" && n < 3 { printf "%s%s", sep, $0; sep = ", "; n++ }')"
  # and the change is in the image: in the installed package and in /project
  local mnt changed=0 marker='try_images.sh cache check'
  mnt="$(podman image mount "$tag")"
  mounted_images+=("$tag")
  if grep -qs "$marker" "$mnt"/opt/venv/lib/python3*/site-packages/lmforge/__init__.py \
     && grep -qs "$marker" "$mnt/project/src/lmforge/__init__.py"; then changed=1; fi
  podman image umount "$tag" >/dev/null 2>&1 || true
  if [ -z "$uncached" ] && [ "$changed" = 1 ]; then
    pass "cpu: a code change rebuilt in ${build_s} s with torch and the dependencies from the cache, the change installed (layers shared: ${shared/ / of }; newest: $new_bytes)"
  elif [ "$changed" = 0 ]; then
    fail "cpu: after a code change the image still holds the old code (the installed lmforge or /project)"
  else
    fail "cpu: a code change re-ran dependency steps: $uncached"
  fi
}

# ------------------------------------------------------------------ main
kinds=(cpu cuda)
[ -n "$only" ] && kinds=("$only")
declare -A built_s size_b
for kind in "${kinds[@]}"; do
  dockerfile=docker/Dockerfile; [ "$kind" = cuda ] && dockerfile=docker/Dockerfile.cuda
  tag="$TRY_REPO:$kind"
  step "$kind: build $dockerfile -> $tag"
  if build "$kind" "$dockerfile" "$tag" "$REPO" "$scratch/$kind-build.log"; then
    built_s[$kind]=$build_s
    size_b[$kind]="$(podman image inspect --format '{{.Size}}' "$tag")"
    cached_steps="$(grep -c '^--> Using cache ' "$scratch/$kind-build.log" || true)"
    pass "$kind: built in ${build_s} s ($cached_steps steps from the cache), $(mib "${size_b[$kind]}")"
  else
    fail "$kind: build"
    continue
  fi
  step "$kind: inside the image"
  smoke "$kind" "$tag"
  if [ "$kind" = cpu ] && [ "$cache_check" = 1 ]; then
    step "cpu: a change to the code"
    cache_check_cpu
  fi
done

step "summary"
printf '%s\n' "${summary[@]}"
for kind in "${kinds[@]}"; do
  [ -n "${size_b[$kind]:-}" ] && echo "image $TRY_REPO:$kind: $(mib "${size_b[$kind]}"), built in ${built_s[$kind]} s"
done
[ -n "${context_size:-}" ] && echo "build context as COPY . received it: $(mib "$context_size"), $context_files files"
if [ "$failures" -gt 0 ]; then echo "try_images: $failures step(s) failed"; exit 1; fi
echo "try_images: every step passed"
