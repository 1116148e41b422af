"""The stage commands: one per kind of stage (``clean``, ``quality``, ``tokenizer``, ``tokenize``, ``dataset``,
``pretrain``, ``finetune``, ``evaluate``, ``report``), each running its stages of the stage
graph (``lmforge stages``), and ``run``, all of them."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

import click

from ..config import ARCHITECTURE_NAMES, Params
from ..objectives.registry import OBJECTIVES, tokenizer_kind
from ..tokenizer_kinds import KINDS as TOKENIZER_KINDS
from .options import (FAILED, _fail, _log, _params, force_option, project_options, restart_option,
                      user_errors)


def _narrowed(params: Params, **sections: dict) -> Params:
    """A copy of ``params`` with some keys set (validated): what a command asks for replaces
    what params.yaml enables, so the graph holds exactly the stages to run."""
    from pydantic import ValidationError

    out = params.model_copy(deep=True)
    for section, values in sections.items():
        for key, value in values.items():
            try:
                setattr(getattr(out, section), key, value)
            except ValidationError as exc:  # e.g. a --task that names no task
                _fail(f"{section}.{key}: " + "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors()))
    return out


def _run_stages(params: Params, select: Callable | None = None, force: bool = False) -> None:
    """Build the stage graph for ``params`` and run its stages (those ``select`` keeps) in order,
    printing each one's summary. Errors are one line: exit 2 when the graph cannot be built
    (parameters, recipes) or a stage's output would replace what it did not make (checked for
    every stage before the first runs), 1 when a stage fails."""
    from ..stages import build_stages

    with user_errors():
        stages = [stage for stage in build_stages(params, root=".") if select is None or select(stage)]
        for stage in stages:
            stage.check_outputs(force)
    with user_errors(FAILED):
        for stage in stages:
            click.echo(stage.summary(stage.run(params, _log, force=force)))


# The data commands build a graph without the training stages: they need no recipes.
_NO_TRAINING = {"architectures": []}

# Names from the registries.
_KIND = click.Choice(TOKENIZER_KINDS)
_OBJECTIVE = click.Choice(list(OBJECTIVES))
_ARCH = click.Choice(ARCHITECTURE_NAMES)


@click.command()
@click.option("--input", "-i", "inputs", multiple=True, help="File, directory, 'stdlib' or 'hf:NAME?config=..&split=..' (repeatable).")
@click.option("--output", "-o", help="Output directory (default: clean.output in params.yaml).")
@project_options(set_help="Override a parameter, e.g. clean.rules.min_sentences=5.")
@click.option("--workers", type=int, help="Worker processes (0: one per core).")
@click.option("--on-bad-input", type=click.Choice(["fail", "skip"]), help="Stop at a bad input file, or skip and count it.")
@click.option("--max-documents", type=int, help="Read at most this many documents from each input.")
@force_option
def clean(inputs, output, params_path, overrides, workers, on_bad_input, max_documents, force) -> None:
    """Clean a corpus with the C4 rules, language ID, bad-words filter, line and near-duplicate dedup.

    Writes Parquet shards, stats.json and dropped/<reason>.jsonl samples to the output directory.
    Flags override params.yaml; a re-run with the same inputs resumes or reports it is up to date.

    \b
    Example: lmforge clean -i data/raw/ -o data/clean --workers 8
    """
    flags = list(overrides)
    if inputs:
        flags.append("clean.inputs=" + json.dumps(list(inputs)))
    for key, value in (("output", output), ("workers", workers), ("on_bad_input", on_bad_input), ("max_documents", max_documents)):
        if value is not None:
            flags.append(f"clean.{key}={json.dumps(value)}")
    params = _params(params_path, flags)
    _run_stages(_narrowed(params, train=_NO_TRAINING, dataset={"objectives": []}), lambda s: s.kind == "clean", force)


@click.command()
@project_options(set_help="Override a parameter, e.g. quality.keep_fraction=0.3.")
@force_option
def quality(params_path, overrides, force) -> None:
    """Keep the clean documents most like a reference set (optional; quality.enabled).

    Trains a classifier (hashed word unigrams and bigrams, logistic regression: fastText's model
    family) on quality.reference against the clean corpus, scores every clean document and keeps
    the top quality.keep_fraction (or those scoring at least quality.threshold). Writes Parquet
    shards (each document's score in its metadata as quality_score), scores.parquet, the model
    (model.joblib), stats.json with its held-out accuracy and AUC, samples/ of kept and dropped
    documents and scores.png to quality.output, which the tokenizers then read.

    \b
    Example: lmforge quality --set quality.enabled=true --set 'quality.reference=["docs/"]'
    """
    params = _params(params_path, list(overrides))
    if not params.quality.enabled:
        _fail("quality.enabled is false: set it to true in params.yaml (or --set quality.enabled=true); the stages "
              "after clean then read quality.output")
    _run_stages(_narrowed(params, train=_NO_TRAINING, dataset={"objectives": []}), lambda s: s.kind == "quality", force)


@click.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Train only these kinds (default: tokenizer.kinds).")
@project_options()
@force_option
def tokenizer(kinds, params_path, overrides, force) -> None:
    """Train the tokenizers (byte-level BPE, WordPiece, Unigram, ELMo characters) on the clean corpus.

    Each is saved under tokenizer.output/<kind>/ as a directory that
    transformers.PreTrainedTokenizerFast.from_pretrained loads, with metrics.json measured on
    the validation split.

    \b
    Example: lmforge tokenizer --kind bpe --kind wordpiece
    """
    params = _params(params_path, list(overrides))
    kinds = list(kinds) or list(params.tokenizer.kinds)
    _run_stages(_narrowed(params, train=_NO_TRAINING, dataset={"objectives": []}, tokenizer={"kinds": kinds}),
                lambda s: s.kind == "tokenizer", force)


@click.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Encode only with these kinds (default: tokenize.kinds).")
@project_options()
@force_option
def tokenize(kinds, params_path, overrides, force) -> None:
    """Encode the clean corpus once per tokenizer kind into memory-mapped token stores.

    \b
    Example: lmforge tokenize --kind bpe
    """
    params = _params(params_path, list(overrides))
    kinds = list(kinds) or params.tokenize.kinds or list(params.tokenizer.kinds)
    needed = list(dict.fromkeys([*params.tokenizer.kinds, *kinds]))
    _run_stages(_narrowed(params, train=_NO_TRAINING, dataset={"objectives": []}, tokenize={"kinds": kinds},
                          tokenizer={"kinds": needed}),
                lambda s: s.kind == "tokens" and s.key["kind"] in kinds, force)


@click.command()
@click.argument("objectives", nargs=-1, type=_OBJECTIVE)
@click.option("--mode", type=click.Choice(["dynamic", "static"]), help="Override dataset.mode.")
@project_options()
@force_option
def dataset(objectives, mode, params_path, overrides, force) -> None:
    """Build pretraining objectives' datasets (default: dataset.objectives) from the token stores.

    Writes dataset.output/<objective>/stats.json (mask rates, span lengths, label balance,
    length histogram) and, in static mode, the examples of epoch 0 as Parquet.

    \b
    Example: lmforge dataset mlm span_corruption --mode static
    """
    flags = list(overrides) + ([f"dataset.mode={mode}"] if mode else [])
    params = _params(params_path, flags)
    wanted = list(objectives) or list(params.dataset.objectives)
    kinds = list(dict.fromkeys([*params.tokenizer.kinds, *(tokenizer_kind(o) for o in wanted)]))
    _run_stages(_narrowed(params, train=_NO_TRAINING, dataset={"objectives": wanted}, tokenizer={"kinds": kinds}),
                lambda s: s.kind == "dataset", force)


@click.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@project_options(set_help="Override a parameter, e.g. train.max_steps=20, or a recipe's: pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.003.")
@restart_option
@force_option
def pretrain(architectures, params_path, overrides, restart, force) -> None:
    """Pretrain architectures (default: train.architectures) on their objectives, as pipelines/<arch>.yaml says.

    Trains in <train.output>/<arch>/.pretrain.attempts/<settings>/ (checkpoints) and replaces
    <train.output>/<arch>/pretrain only when done; the same command after an interruption resumes
    from last.ckpt. For many GPUs launch one process per device:
    torchrun --nproc_per_node N -m lmforge.cli pretrain ARCH --set train.devices=N

    \b
    Example: lmforge pretrain gpt bert --set train.max_steps=500
             torchrun --nproc_per_node 8 -m lmforge.cli pretrain t5 --set train.size=base --set train.strategy=fsdp
    """
    params = _params(params_path, list(overrides) + (["train.restart=true"] if restart else []))
    archs = list(architectures) or list(params.train.architectures)
    _run_stages(_narrowed(params, train={"architectures": archs}), lambda s: s.kind == "pretrain", force)


def _check_families(archs: list[str], tasks: list[str], *, named: bool) -> None:
    """An architecture named on the command line for a task of a family it does not take is an
    error; from the defaults, the pair is skipped with a line saying so."""
    from ..finetuning.generation.features import WRITERS, fits_family
    from ..finetuning.tasks.load import task_family

    for task in tasks:
        family = task_family(task)
        for arch in archs:
            if fits_family(arch, family):
                continue
            message = f"{arch} does not fine-tune on {task}, a {family} task (the architectures that write: " \
                      f"{', '.join(WRITERS)})"
            if named:
                _fail(message)
            _log(f"finetune: skipped: {message}")


@click.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--task", "tasks", multiple=True, help="A corpus task (docstring_kind, the default; docstring_package, docstring_signature, docstring_params, docstring_qa, docstring_summary), a folder of train/validation/test files (CSV/TSV/JSONL with GLUE's columns or GLUE's own files, classification or regression; CoNLL or JSONL tagging; SQuAD JSON/JSONL; generation JSONL/CSV/TSV), or hf:NAME[/CONFIG].")
@project_options()
@click.option("--from-scratch", is_flag=True, help="The control: the same architecture, randomly initialised, with the same recipe and budget.")
@restart_option
@force_option
def finetune(architectures, tasks, params_path, overrides, from_scratch, restart, force) -> None:
    """Fine-tune pretrained architectures on downstream tasks (default: finetune.tasks).

    Each task's family picks the head: classification, regression, tagging and span QA heads
    for every architecture (T5, BART and Switch text to text where their recipe's
    finetune.mode says so); generation for BART, T5,
    Switch and GPT. Writes <train.output>/<arch>/<task>/ (model, history, metrics); with
    --from-scratch, <train.output>/<arch>/<task>-scratch/.

    \b
    Example: lmforge finetune bert --task docstring_kind --from-scratch
    """
    params = _params(params_path, list(overrides) + (["train.restart=true"] if restart else []))
    archs = list(architectures) or list(params.train.architectures)
    tasks = list(tasks) or list(params.finetune.tasks)
    _check_families(archs, tasks, named=bool(architectures))
    init = "scratch" if from_scratch else "pretrained"
    _run_stages(_narrowed(params, train={"architectures": archs}, finetune={"tasks": tasks, "scratch_control": from_scratch}),
                lambda s: s.kind == "finetune" and s.key["init"] == init, force)


@click.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@project_options()
@click.option("--harness", "harness", multiple=True, metavar="TASK",
              help="With --model: score that folder on this zero-shot task (repeatable; the eval extra).")
@click.option("--model", "model_dir", type=click.Path(), help="An lmforge model folder or a transformers folder.")
def evaluate(architectures, params_path, overrides, harness, model_dir) -> None:
    """Collect each architecture's intrinsic and downstream results, log them, and move the
    registry's champion alias only where the new model is better. With --harness and --model,
    score one model folder (lmforge's, or any transformers causal LM, e.g. one `lmforge export`
    wrote) on zero-shot tasks instead and print the scores.

    \b
    Example: lmforge evaluate gpt bert
             lmforge evaluate --harness docstring_next --model exported/gpt
    """
    if bool(harness) != bool(model_dir) or (harness and architectures):
        _fail("--harness and --model go together, without architectures")
    params = _params(params_path, list(overrides))
    if harness:
        from ..evaluation.zero_shot import folder_scores

        with user_errors():
            scores = folder_scores(params, pathlib.Path(model_dir), list(harness))
        for task, values in scores.items():
            click.echo(f"{task}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in values.items()))
        return
    archs = list(architectures) or list(params.train.architectures)
    _run_stages(_narrowed(params, train={"architectures": archs}), lambda s: s.kind == "evaluate")


@click.command()
@project_options()
def report(params_path, overrides) -> None:
    """Write the leaderboard (CSV, Markdown, metrics.json) and charts (loss curves, bits per
    byte, downstream accuracy) to evaluate.output, and print the table.

    \b
    Example: lmforge report --params params.yaml
    """
    params = _params(params_path, list(overrides))
    if not params.train.architectures:
        _fail("train.architectures is empty: there is nothing to report")
    _run_stages(params, lambda s: s.kind == "report")


@click.command()
@project_options()
@force_option
def run(params_path, overrides, force) -> None:
    """Run the whole pipeline as params.yaml configures it: every stage of the stage graph
    (`lmforge stages`) in order, from clean to report. Stages whose inputs and settings are
    unchanged say "up to date"; an interrupted training stage resumes from its checkpoint.

    \b
    Example: lmforge run --set train.architectures=[gpt,bert]
    """
    _run_stages(_params(params_path, list(overrides)), force=force)
