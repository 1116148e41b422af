"""The ``lmforge`` command line: one command per stage, each running its stages of the stage graph
(``lmforge stages``), plus ``run`` (all of them), ``dvc`` and ``stages``; and the commands that use
the trained models (``generate``, ``fill-mask``, ``embed``, ``predict``, ``export``: lmforge.inference)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
from collections.abc import Callable

import click

from .config import ARCHITECTURE_NAMES, ConfigError, Params, load_params
from .objectives.registry import OBJECTIVES, tokenizer_kind
from .tokenizer_kinds import KINDS as TOKENIZER_KINDS
from .errors import LmforgeError
from .redact import redact

# What a command reports as one line instead of a traceback: lmforge's own errors (bad
# configuration, input, corpus, task, ...) and the operating system's (a file that is missing
# or cannot be written).
USER_ERRORS: tuple[type[Exception], ...] = (LmforgeError, OSError)


# Exit status: 2 when the command line, the parameters or the input are wrong (nothing ran),
# 1 when a stage that started failed.
USAGE, FAILED = 2, 1


def _fail(message: str, code: int = USAGE) -> None:
    click.echo(f"error: {redact(message)}", err=True)  # a URI's password is never shown
    sys.exit(code)


def _log(message: str) -> None:
    if os.environ.get("LMFORGE_VERBOSITY") != "quiet":
        click.echo(redact(message), err=True)


def _params(params_path: str, overrides: list[str]) -> Params:
    try:
        return load_params(params_path, overrides)
    except ConfigError as exc:
        _fail(str(exc))


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
    from .stages import build_stages

    try:
        stages = [stage for stage in build_stages(params, root=".") if select is None or select(stage)]
        for stage in stages:
            stage.check_outputs(force)
    except USER_ERRORS as exc:
        _fail(str(exc))
    try:
        for stage in stages:
            click.echo(stage.summary(stage.run(params, _log, force=force)))
    except USER_ERRORS as exc:
        _fail(str(exc), FAILED)


# The data commands build a graph without the training stages: they need no recipes.
_NO_TRAINING = {"architectures": []}

_RESTART_HELP = ("Discard the resume state of these settings and train from the start (train.restart); "
                 "changed settings never discard another attempt's checkpoints.")

_FORCE_HELP = ("Replace an output folder that is not empty and holds no finished output of its stage (never one "
               "that is or holds an input, the project folder, the home folder or /).")
_force = click.option("--force", is_flag=True, help=_FORCE_HELP)

# Names from the registries.
_KIND = click.Choice(TOKENIZER_KINDS)
_OBJECTIVE = click.Choice(list(OBJECTIVES))
_ARCH = click.Choice(ARCHITECTURE_NAMES)


@click.group()
@click.version_option(package_name="lmforge")
def main() -> None:
    """lmforge: clean a corpus the way C4 was cleaned, then train the transformer LM family on it."""


@main.command()
@click.option("--input", "-i", "inputs", multiple=True, help="File, directory, 'stdlib' or 'hf:NAME?config=..&split=..' (repeatable).")
@click.option("--output", "-o", help="Output directory (default: clean.output in params.yaml).")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter, e.g. clean.rules.min_sentences=5.")
@click.option("--workers", type=int, help="Worker processes (0: one per core).")
@click.option("--on-bad-input", type=click.Choice(["fail", "skip"]), help="Stop at a bad input file, or skip and count it.")
@click.option("--max-documents", type=int, help="Read at most this many documents from each input.")
@_force
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




@main.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Train only these kinds (default: tokenizer.kinds).")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
@_force
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


@main.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Encode only with these kinds (default: tokenize.kinds).")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
@_force
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


@main.command()
@click.argument("objectives", nargs=-1, type=_OBJECTIVE)
@click.option("--mode", type=click.Choice(["dynamic", "static"]), help="Override dataset.mode.")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
@_force
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




@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter, e.g. train.max_steps=20, or a recipe's: pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.003.")
@click.option("--restart", is_flag=True, help=_RESTART_HELP)
@_force
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
    from .finetuning.generation_features import WRITERS, fits_family
    from .finetuning.tasks.load import task_family

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


@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--task", "tasks", multiple=True, help="A corpus task (docstring_kind, the default; docstring_package, docstring_signature, docstring_params, docstring_qa, docstring_summary), a folder of train/validation/test files (CSV/TSV/JSONL with GLUE's columns or GLUE's own files, classification or regression; CoNLL or JSONL tagging; SQuAD JSON/JSONL; generation JSONL/CSV/TSV), or hf:NAME[/CONFIG].")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
@click.option("--from-scratch", is_flag=True, help="The control: the same architecture, randomly initialised, with the same recipe and budget.")
@click.option("--restart", is_flag=True, help=_RESTART_HELP)
@_force
def finetune(architectures, tasks, params_path, overrides, from_scratch, restart, force) -> None:
    """Fine-tune pretrained architectures on downstream tasks (default: finetune.tasks).

    Each task's family picks the head: classification (text to text for T5, BART and Switch),
    regression, tagging and span QA heads for every architecture; generation for BART, T5,
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


@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
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
        from .training.harness import folder_scores

        try:
            scores = folder_scores(params, pathlib.Path(model_dir), list(harness))
        except USER_ERRORS as exc:
            _fail(str(exc))
        for task, values in scores.items():
            click.echo(f"{task}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in values.items()))
        return
    archs = list(architectures) or list(params.train.architectures)
    _run_stages(_narrowed(params, train={"architectures": archs}), lambda s: s.kind == "evaluate")


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
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


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
@_force
def run(params_path, overrides, force) -> None:
    """Run the whole pipeline as params.yaml configures it: every stage of the stage graph
    (`lmforge stages`) in order, from clean to report. Stages whose inputs and settings are
    unchanged say "up to date"; an interrupted training stage resumes from its checkpoint.

    \b
    Example: lmforge run --set train.architectures=[gpt,bert]
    """
    _run_stages(_params(params_path, list(overrides)), force=force)


@main.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Replace the starter's files where the folder already has them.")
def init(folder, force) -> None:
    """Start a project in FOLDER (default: here): the starter params.yaml (every parameter at
    its default, commented) and pipelines/ (one recipe per architecture). Then `lmforge run`
    trains on the embedded default corpus, and `lmforge dvc` writes dvc.yaml for `dvc repro`.

    \b
    Example: lmforge init my-project && cd my-project && lmforge run
    """
    from .starter import init_project

    try:
        written = init_project(folder, force=force)
    except USER_ERRORS as exc:
        _fail(str(exc))
        return
    recipes = sum(1 for w in written if w.parent.name == "pipelines" and w.suffix == ".yaml")
    click.echo(f"{folder}: wrote params.yaml and pipelines/ ({recipes} recipes)")


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when dvc.yaml is not what params.yaml and the recipes give.")
def dvc(params_path, check) -> None:
    """Write dvc.yaml from the stage graph (params.yaml and pipelines/*.yaml). Run it after
    enabling an architecture, a tokenizer, an objective or a task; `dvc repro` then runs them.

    \b
    Example: lmforge dvc && dvc repro
    """
    from pathlib import Path

    from .stages import build_stages, dvc_yaml, missing_param_keys, write_dvc_yaml

    try:
        if check:
            graph = build_stages(root=".", params_path=params_path)
            missing = missing_param_keys(graph, params_path)
            if missing:
                _fail(f"{params_path} does not spell out {', '.join(missing)}, which the stages in dvc.yaml read from it")
            text = dvc_yaml(graph)
            current = Path("dvc.yaml").read_text(encoding="utf-8") if Path("dvc.yaml").exists() else None
            if current != text:
                click.echo("dvc.yaml is stale: run `lmforge dvc` to regenerate it", err=True)
                sys.exit(1)
            click.echo("dvc.yaml is up to date")
            return
        path, changed = write_dvc_yaml(".", params_path=params_path)
    except USER_ERRORS as exc:
        _fail(str(exc))
        return
    click.echo(f"{path}: {'written' if changed else 'up to date'}")


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--json", "as_json", is_flag=True, help="One JSON list of {name, kind, state, reason, finished}.")
def status(params_path, as_json) -> None:
    """Where each stage stands: done, stale (what changed: parameters, code, inputs; or a stale
    stage upstream), running (who holds its output), never run, or unrecorded (outputs with no
    record in dvc.lock). Compares DVC's record of each stage's last run with the project now.

    \b
    Example: lmforge status
             lmforge status --json | jq '.[] | select(.state == "stale") | .name'
    """
    import json

    from .stages import build_stages
    from .stages.status import stage_statuses, status_table

    try:
        statuses = stage_statuses(build_stages(root=".", params_path=params_path))
    except USER_ERRORS as exc:
        _fail(str(exc))
        return
    click.echo(json.dumps([s.as_dict() for s in statuses], indent=2) if as_json else status_table(statuses))


@main.group()
def tracking() -> None:
    """MLflow tracking: what runs kept while the server was away."""


@tracking.command("sync")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def tracking_sync(params_path, overrides) -> None:
    """Send what training runs kept in tracking.spool_dir while their server did not answer, to
    the configured tracking.uri only (runs kept for another server stay kept). Exit status 1 when
    the server still does not answer or runs of another server wait.

    \b
    Example: lmforge tracking sync
    """
    from .tracking.tracker import send_spooled

    params = _params(params_path, list(overrides))
    try:
        sent, waiting = send_spooled(params.tracking.spool_dir, params.tracking.uri, log=_log)
    except USER_ERRORS as exc:
        _fail(str(exc))
        return
    click.echo(f"tracking sync: {sent} runs sent, {waiting} still waiting")
    if waiting:
        sys.exit(1)


# ----------------------------------------------------------------------------- using trained models

def _model_options(command):
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")(command)
    command = click.option("--params", "params_path", default="params.yaml", show_default=True,
                           help="Parameters file (for train.output when MODEL is an architecture name).")(command)
    return click.option("--task", help="With an architecture name: its model fine-tuned on this task.")(command)


def _load(model: str, task: str | None, params_path: str, overrides: list[str], *, output: str | None = None,
          inputs: tuple = ()):
    """The model a command names, loaded; errors are one line. With ``output`` (what the command
    writes), that path is checked first (``artifacts.check_output``): never the model folder,
    one of ``inputs``, the project, home or root folder, before any weight is read."""
    from pathlib import Path

    from .artifacts import check_output
    from .inference.loading import load, model_folder

    train_output = "models"
    if Path(params_path).exists() or overrides:
        train_output = _params(params_path, overrides).train.output
    if output is not None:
        check_output(output, inputs=(model_folder(model, train_output=train_output, task=task), *inputs))
    return load(model, train_output=train_output, task=task)


def _inputs(text: str | None, file: str | None):
    from .inference.texts import read_inputs

    return read_inputs(text, file)


@main.command()
@click.argument("model")
@click.argument("prompt", required=False)
@click.option("--file", "file", type=click.Path(), help="Prompts, one per line.")
@click.option("--max-new-tokens", type=int, default=40, show_default=True)
@click.option("--beams", type=int, default=1, show_default=True, help="Beam search with this many beams (1: greedy or sampling).")
@click.option("--sample", is_flag=True, help="Draw each token from the distribution instead of taking the most likely.")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=0, show_default=True, help="Sample from the k most likely tokens (0: all).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Sample from the smallest set holding this probability.")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True)
@click.option("--length-penalty", type=float, default=1.0, show_default=True, help="Beam search: exponent of the length normalisation.")
@click.option("--seed", type=int, default=0, show_default=True)
@_model_options
def generate(model, prompt, file, max_new_tokens, beams, sample, temperature, top_k, top_p, repetition_penalty,
             length_penalty, seed, task, params_path, overrides) -> None:
    """Write text after PROMPT (or each line of --file, or of standard input with "-") with a model that
    generates: GPT, Transformer-XL, XLNet, BART, T5, Switch. Tokens are printed as they come.

    \b
    Example: lmforge generate gpt "Return the" --sample --top-p 0.9 --seed 1

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from .inference.generate import Settings, check_generator, generate_text
    from .inference.sampling import Sampling

    try:
        loaded = _load(model, task, params_path, list(overrides))
        check_generator(loaded)
        settings = Settings(max_new_tokens, beams, Sampling(sample, temperature, top_k, top_p, repetition_penalty), seed,
                            length_penalty)
        prompts, _ = _inputs(prompt, file)
        for text in prompts:
            generate_text(loaded, text, settings, on_text=lambda piece: click.echo(piece, nl=False))
            click.echo()
    except USER_ERRORS as exc:
        _fail(str(exc))


@main.command("fill-mask")
@click.argument("model")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(), help="Texts, one per line.")
@click.option("--top-k", type=int, default=5, show_default=True, help="Candidates shown per blank (BERT, ALBERT, ERNIE).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per text.")
@_model_options
def fill_mask_command(model, text, file, top_k, as_json, task, params_path, overrides) -> None:
    """Fill the blanks of TEXT: [MASK] (or the model's own mask token) for BERT, ALBERT, ERNIE and
    BART, <extra_id_0>, <extra_id_1>, ... (or <mask>) for T5 and Switch.

    \b
    Example: lmforge fill-mask bert "Return the [MASK] of the parser."

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from .inference.fill_mask import fill_mask

    try:
        loaded = _load(model, task, params_path, list(overrides))
        texts, _ = _inputs(text, file)
        for t in texts:
            filled = fill_mask(loaded, t, top_k=top_k)
            if as_json:
                click.echo(json.dumps({"text": t, "sequence": filled.sequence, "blanks": filled.blanks}))
                continue
            click.echo(filled.sequence)
            for i, candidates in enumerate(filled.blanks, 1):
                shown = ", ".join(c["token_str"] if c["score"] is None else f"{c['token_str']!r} {c['score']:.3f}"
                                  for c in candidates)
                click.echo(f"  blank {i}: {shown}")
    except USER_ERRORS as exc:
        _fail(str(exc))


@main.command()
@click.argument("model")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(), help="Texts: one per line, or a .csv/.tsv/.jsonl with a text column.")
@click.option("--output", "-o", required=True, type=click.Path(), help=".npy (one vector per text) or .parquet (any level).")
@click.option("--level", type=click.Choice(["text", "word", "token"]), default="text", show_default=True)
@click.option("--pooling", type=click.Choice(["mean", "cls", "last"]), default="mean", show_default=True,
              help="A text's vector: the mean of its tokens', the [CLS] token's, or the last token's.")
@click.option("--mix", type=click.Choice(["top", "uniform", "learned"]), default="top", show_default=True,
              help="ELMo: its top layer, the layers' mean, or a fine-tuned model's learned scalar mix.")
@click.option("--batch-size", type=int, default=32, show_default=True)
@_model_options
def embed(model, text, file, output, level, pooling, mix, batch_size, task, params_path, overrides) -> None:
    """Contextual vectors of TEXT (or --file, or standard input with "-") from any trained model.

    \b
    Example: lmforge embed bert --file sentences.txt --level word -o words.parquet

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from .inference.embed import embed as run_embed, write
    from .progress import Progress

    try:
        loaded = _load(model, task, params_path, list(overrides), output=output, inputs=(file,))
        texts, _ = _inputs(text, file)
        with Progress(len(texts), "embed", "texts") as bar:
            done = run_embed(loaded, texts, level=level, pooling=pooling, mix=mix, batch_size=batch_size,
                             progress=bar.update)
        write(done, texts, output, level)
    except USER_ERRORS as exc:
        _fail(str(exc))
    rows = sum(len(v) for v in done.vectors)
    click.echo(f"embed: {rows} vectors of {done.vectors[0].shape[-1]} for {len(texts)} texts -> {output}")


@main.command()
@click.argument("model")
@click.argument("text", required=False)
@click.option("--pair", help="The second text, for a model fine-tuned on pairs.")
@click.option("--file", "file", type=click.Path(), help="Texts: one per line, or .csv/.tsv/.jsonl with a text (and text_pair) column.")
@click.option("--output", "-o", type=click.Path(), help="Write .csv or .jsonl (text, label, score, one column per label).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@_model_options
def predict(model, text, pair, file, output, batch_size, task, params_path, overrides) -> None:
    """Label TEXT (or --file, or standard input with "-") with a fine-tuned model: the label and its
    probability, one tab-separated line per text.

    \b
    Example: lmforge predict bert --task docstring_kind "Return the parsed value."

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from .inference.predict import predict as run_predict
    from .inference.texts import write_predictions

    try:
        loaded = _load(model, task, params_path, list(overrides), output=output, inputs=(file,))
        texts, pairs = _inputs(text, file)
        if pair is not None:
            pairs = [pair] * len(texts)
        results = run_predict(loaded, texts, pairs, batch_size=batch_size)
        rows = [{"text": t, "label": r.label, "score": r.score, **{f"p_{k}": v for k, v in r.scores.items()}}
                for t, r in zip(texts, results)]
        printed = write_predictions(rows, output)
    except USER_ERRORS as exc:
        _fail(str(exc))
    click.echo(printed if printed is not None else f"predict: {len(rows)} rows -> {output}")


@main.command()
@click.argument("model")
@click.argument("out_dir", type=click.Path())
@_model_options
@click.option("--format", "fmt", type=click.Choice(["safetensors", "onnx"]), default="safetensors", show_default=True,
              help="safetensors: a transformers folder; onnx: model.onnx (not ELMo, not Switch).")
def export(model, out_dir, task, params_path, overrides, fmt) -> None:
    """Write MODEL as a transformers folder OUT_DIR (config, safetensors weights, tokenizer, README.md)
    that AutoModel* and pipeline() load; with --format onnx, as model.onnx (input ids and mask to
    logits, any batch and length) with the same tokenizer and README.md.

    \b
    Example: lmforge export bert --task docstring_kind exported/bert-docstring
             lmforge export gpt exported/gpt-onnx --format onnx

    MODEL: a model folder (models/gpt/pretrain/model), its run folder, or an architecture name (its
    pretrained model under train.output; with --task, its fine-tuned one).
    """
    from .inference.export import export_model, export_onnx

    try:
        loaded = _load(model, task, params_path, list(overrides), output=out_dir)
        out = (export_onnx if fmt == "onnx" else export_model)(loaded, out_dir)
    except USER_ERRORS as exc:
        _fail(str(exc))
    click.echo(f"export: {out}")


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
def stages(params_path) -> None:
    """List the stage graph: each stage, its group, what it reads from and its command.

    \b
    Example: lmforge stages --params params.yaml
    """
    from .stages import build_stages

    try:
        graph = build_stages(root=".", params_path=params_path)
    except USER_ERRORS as exc:
        _fail(str(exc))
        return
    for s in graph:
        click.echo(f"{s.name:32s} {s.group:12s} <- {', '.join(s.upstream) or '-':40s} {s.cli}")


# ----------------------------------------------------------------------------- --quiet / --verbose on every command

def _set_verbosity(ctx, param, value) -> None:
    # in the environment: the stages' progress (lmforge.progress) and the training processes a
    # command starts read it too
    if value:
        os.environ["LMFORGE_VERBOSITY"] = param.name


def _with_verbosity(command: click.Command) -> None:
    command.params += [
        click.Option(["--quiet", "-q"], is_flag=True, expose_value=False, is_eager=True, callback=_set_verbosity,
                     help="Print results and errors only: no progress, no stage logs."),
        click.Option(["--verbose", "-v"], is_flag=True, expose_value=False, is_eager=True, callback=_set_verbosity,
                     help="Also the libraries' own logs and warnings (Lightning, MLflow)."),
    ]
    for sub in getattr(command, "commands", {}).values():
        _with_verbosity(sub)


for _command in main.commands.values():
    _with_verbosity(_command)


if __name__ == "__main__":
    main()
