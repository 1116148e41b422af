"""The ``lmforge`` command line: one command per stage."""

from __future__ import annotations

import json
import sys

import click

from .config import ConfigError, load_params
from .corpus.document import CorpusError


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


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
def clean(inputs, output, params_path, overrides, workers, on_bad_input, max_documents) -> None:
    """Clean a corpus with the C4 rules, language ID, bad-words filter, line and near-duplicate dedup.

    Writes Parquet shards, stats.json and dropped/<reason>.jsonl samples to the output directory.
    Flags override params.yaml; a re-run with the same inputs resumes or reports it is up to date.
    """
    from .cleaning.stage import run_clean

    flags = list(overrides)
    if inputs:
        flags.append("clean.inputs=" + json.dumps(list(inputs)))
    for key, value in (("output", output), ("workers", workers), ("on_bad_input", on_bad_input), ("max_documents", max_documents)):
        if value is not None:
            flags.append(f"clean.{key}={json.dumps(value)}")
    params = _params(params_path, flags)
    try:
        result = run_clean(params.clean, log=lambda m: click.echo(m, err=True))
    except _ERRORS as exc:
        _fail(str(exc))
        return
    click.echo(format_clean_stats(result.stats, result.seconds, result.skipped))


_KIND = click.Choice(["bpe", "wordpiece", "unigram", "char"])
_ERRORS: tuple[type[Exception], ...] = (ConfigError, CorpusError, FileNotFoundError, ValueError, RuntimeError)


def _params(params_path: str, overrides: list[str]):
    try:
        return load_params(params_path, overrides)
    except ConfigError as exc:
        _fail(str(exc))


@main.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Train only these kinds (default: tokenizer.kinds).")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def tokenizer(kinds, params_path, overrides) -> None:
    """Train the tokenizers (byte-level BPE, WordPiece, Unigram, ELMo characters) on the clean corpus.

    Each is saved under tokenizer.output/<kind>/ as a directory that
    transformers.PreTrainedTokenizerFast.from_pretrained loads, with metrics.json measured on
    the validation split.
    """
    from .tokenization.train import run_tokenizers

    params = _params(params_path, list(overrides))
    try:
        results = run_tokenizers(params, list(kinds) or None, log=lambda m: click.echo(m, err=True))
    except _ERRORS as exc:
        _fail(str(exc))
        return
    click.echo(format_tokenizer_metrics(results))


@main.command()
@click.option("--kind", "kinds", multiple=True, type=_KIND, help="Encode only with these kinds (default: tokenize.kinds).")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def tokenize(kinds, params_path, overrides) -> None:
    """Encode the clean corpus once per tokenizer kind into memory-mapped token stores."""
    from .tokenization.store import StoreError, TokenStore, build_store

    params = _params(params_path, list(overrides))
    try:
        for kind in list(kinds) or params.tokenize.kinds or params.tokenizer.kinds:
            build_store(params, kind, log=lambda m: click.echo(m, err=True))
            click.echo(TokenStore(f"{params.tokenize.output}/{kind}").summary())
    except (*_ERRORS, StoreError) as exc:
        _fail(str(exc))


@main.command()
@click.argument("objectives", nargs=-1)
@click.option("--mode", type=click.Choice(["dynamic", "static"]), help="Override dataset.mode.")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def dataset(objectives, mode, params_path, overrides) -> None:
    """Build pretraining objectives' datasets (default: dataset.objectives) from the token stores.

    Writes dataset.output/<objective>/stats.json (mask rates, span lengths, label balance,
    length histogram) and, in static mode, the examples of epoch 0 as Parquet.
    """
    from .objectives.base import ObjectiveError
    from .datasets.stage import build_dataset
    from .tokenization.store import StoreError

    flags = list(overrides) + ([f"dataset.mode={mode}"] if mode else [])
    params = _params(params_path, flags)
    try:
        for name in list(objectives) or params.dataset.objectives:
            summary = build_dataset(params, name, log=lambda m: click.echo(m, err=True))
            click.echo(format_dataset_summary(summary))
    except (*_ERRORS, StoreError, ObjectiveError) as exc:
        _fail(str(exc))


def format_dataset_summary(summary: dict) -> str:
    lines = [f"dataset {summary['objective']} ({summary['tokenizer_kind']} tokens, {summary['mode']} masking):"]
    for split, s in summary["splits"].items():
        lines.append(f"  {split:10s} {s['examples_per_epoch']:8,} examples/epoch, mean input length {s['input_length']['mean']:.1f}, "
                     f"{s.get('labels_per_input_token', 0):.3f} labels per input token")
    return "\n".join(lines)


_ARCH = click.Choice(["gpt", "bert", "albert", "ernie", "elmo", "transformer_xl", "xlnet", "bart", "t5", "switch"])


def _training_errors() -> tuple[type[Exception], ...]:
    from .finetuning.features import FeatureError
    from .finetuning.tasks import TaskError
    from .objectives.base import ObjectiveError
    from .tokenization.store import StoreError
    from .training.module import NonFiniteLossError

    return (*_ERRORS, StoreError, ObjectiveError, TaskError, FeatureError, NonFiniteLossError)


@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter, e.g. train.max_steps=20.")
def pretrain(architectures, params_path, overrides) -> None:
    """Pretrain architectures (default: train.architectures) on their objectives, as pipelines/<arch>.yaml says.

    Checkpoints go to <train.output>/<arch>/pretrain/checkpoints; the same command after an
    interruption resumes from last.ckpt. For many GPUs launch one process per device:
    torchrun --nproc_per_node N -m lmforge.cli pretrain ARCH --set train.devices=N
    """
    from .training.pretrain import run_pretrain

    params = _params(params_path, list(overrides))
    try:
        for arch in architectures or params.train.architectures:
            run_pretrain(params, arch, log=lambda m: click.echo(m, err=True))
    except _training_errors() as exc:
        _fail(str(exc))


@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--task", "tasks", multiple=True, help="docstring_kind (default), a folder of train/validation/test CSV or JSONL, or hf:NAME[/CONFIG].")
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def finetune(architectures, tasks, params_path, overrides) -> None:
    """Fine-tune pretrained architectures on downstream tasks (default: finetune.tasks).

    Classification heads for the encoders, GPT, Transformer-XL, XLNet and ELMo; text-to-text
    for T5, BART and Switch. Writes <train.output>/<arch>/<task>/ (model, history, metrics).
    """
    from .training.finetune import run_finetune

    params = _params(params_path, list(overrides))
    try:
        for arch in architectures or params.train.architectures:
            for task in tasks or params.finetune.tasks:
                run_finetune(params, arch, task, log=lambda m: click.echo(m, err=True))
    except _training_errors() as exc:
        _fail(str(exc))


@main.command()
@click.argument("architectures", nargs=-1, type=_ARCH)
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def evaluate(architectures, params_path, overrides) -> None:
    """Collect each architecture's intrinsic and downstream results, log them, and move the
    registry's champion alias only where the new model is better."""
    from .evaluation.evaluate import run_evaluate

    params = _params(params_path, list(overrides))
    try:
        run_evaluate(params, list(architectures) or None, log=lambda m: click.echo(m, err=True))
    except _training_errors() as exc:
        _fail(str(exc))


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def report(params_path, overrides) -> None:
    """Write the leaderboard (CSV, Markdown, metrics.json) and charts (loss curves, bits per
    byte, downstream accuracy) to evaluate.output, and print the table."""
    from .evaluation.report import format_leaderboard, load_evaluations, write_report

    params = _params(params_path, list(overrides))
    try:
        evaluations = load_evaluations(f"{params.evaluate.output}/evaluation", order=params.train.architectures)
        result = write_report(evaluations, params.evaluate.output)
    except _training_errors() as exc:
        _fail(str(exc))
        return
    click.echo(format_leaderboard(result["leaderboard"]))


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def run(params_path, overrides) -> None:
    """Run the whole pipeline as params.yaml configures it: every stage of the stage graph
    (`lmforge stages`) in order, from clean to report. Stages whose inputs and settings are
    unchanged say "up to date"; an interrupted training stage resumes from its checkpoint."""
    from .stages import build_stages

    params = _params(params_path, list(overrides))
    log = lambda m: click.echo(m, err=True)  # noqa: E731
    try:
        for stage in build_stages(params, root="."):
            click.echo(format_stage_result(stage, stage.run(params, log)))
    except _training_errors() as exc:
        _fail(str(exc))


def format_stage_result(stage, result) -> str:
    """What ``lmforge run`` prints after a stage: the same summary as the stage's own command."""
    if stage.kind == "clean":
        return format_clean_stats(result["stats"], result["seconds"], result["skipped"])
    if stage.kind == "tokenizer":
        return format_tokenizer_metrics({stage.key["kind"]: result})
    if stage.kind == "dataset":
        return format_dataset_summary(result)
    if stage.kind == "report":
        from .evaluation.report import format_leaderboard

        return format_leaderboard(result["leaderboard"])
    if stage.kind == "tokens":
        from .tokenization.store import TokenStore

        return TokenStore(stage.paths[0]).summary()
    return f"{stage.name}: done"


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when dvc.yaml is not what params.yaml and the recipes give.")
def dvc(params_path, check) -> None:
    """Write dvc.yaml from the stage graph (params.yaml and pipelines/*.yaml). Run it after
    enabling an architecture, a tokenizer, an objective or a task; `dvc repro` then runs them."""
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
    except ConfigError as exc:
        _fail(str(exc))
        return
    click.echo(f"{path}: {'written' if changed else 'up to date'}")


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
def stages(params_path) -> None:
    """List the stage graph: each stage, its group, what it reads from and its command."""
    from .stages import build_stages

    try:
        graph = build_stages(root=".", params_path=params_path)
    except ConfigError as exc:
        _fail(str(exc))
        return
    for s in graph:
        click.echo(f"{s.name:32s} {s.group:12s} <- {', '.join(s.upstream) or '-':40s} {s.cli}")


def format_tokenizer_metrics(results: dict) -> str:
    lines = ["tokenizers (metrics on the validation split):",
             f"  {'kind':10s} {'vocab':>7s} {'tokens/word':>12s} {'bytes/token':>12s} {'unknown':>9s} {'round trip':>11s}"]
    for kind, m in results.items():
        rt = f"{m['round_trip_rate']:.3f}" + ("" if m["round_trip_promised"] else " (n/a)")
        lines.append(f"  {kind:10s} {m['vocab_size']:7d} {m['tokens_per_word']:12.3f} {m['bytes_per_token']:12.3f} {m['unknown_rate']:9.4f} {rt:>11s}")
    return "\n".join(lines)


def format_clean_stats(stats: dict, seconds: float, skipped: bool) -> str:
    lines = [
        f"clean -> {stats['params']['output']}" + (" (up to date, nothing to do)" if skipped else f" in {seconds:.1f}s"),
        f"  documents: {stats['documents_in']} in, {stats['documents_out']} out ({100 * stats['documents_kept_fraction']:.1f}% kept)",
        f"  bytes:     {stats['bytes_in']} in, {stats['bytes_out']} out ({100 * stats['bytes_kept_fraction']:.1f}% kept)",
        "  dropped documents by reason:",
    ]
    for reason, d in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]["documents"]):
        lines.append(f"    {reason:32s} {d['documents']:8d}  ({d['bytes']} bytes)")
    lines.append("  removed lines by reason:")
    for reason, n in sorted(stats["lines_removed"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {reason:32s} {n:8d}")
    skipped_inputs = stats["inputs"]["skipped_inputs"]
    if skipped_inputs:
        lines.append(f"  skipped inputs: {len(skipped_inputs)}")
        for s in skipped_inputs:
            lines.append(f"    {s['input']}: {s['error']} ({s['documents_read']} documents read before)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
