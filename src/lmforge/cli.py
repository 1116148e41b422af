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
    try:
        params = load_params(params_path, flags)
        result = run_clean(params.clean, log=lambda m: click.echo(m, err=True))
    except (ConfigError, CorpusError, FileNotFoundError, ValueError, RuntimeError) as exc:
        _fail(str(exc))
        return
    click.echo(format_clean_stats(result.stats, result.seconds, result.skipped))


@main.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, help="Parameters file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a parameter.")
def run(params_path, overrides) -> None:
    """Run the whole pipeline as params.yaml configures it (the stages built so far: clean)."""
    from .cleaning.stage import run_clean

    try:
        params = load_params(params_path, list(overrides))
        result = run_clean(params.clean, log=lambda m: click.echo(m, err=True))
    except (ConfigError, CorpusError, FileNotFoundError, ValueError, RuntimeError) as exc:
        _fail(str(exc))
        return
    click.echo(format_clean_stats(result.stats, result.seconds, result.skipped))


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
