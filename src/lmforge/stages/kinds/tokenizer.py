"""The tokenizer stage: one trained tokenizer per kind (byte-level BPE, WordPiece, Unigram, ELMo's
characters), saved as a folder that transformers loads, with its metrics."""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...config import Params
from ..kind import CheckOutcome, CheckSpec, StageKind, charts, read_record, read_json_or_empty
from ..metrics import metrics_path
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...tokenization.tokenizer_stage import run_tokenizer

    kind = stage.key["kind"]
    return run_tokenizer(params, [kind], log=log)[kind]


def format_metrics(results: dict[str, dict]) -> str:
    """The metrics of several tokenizers as one table."""
    lines = ["tokenizers (metrics on the validation split):",
             f"  {'kind':10s} {'vocab':>7s} {'tokens/word':>12s} {'bytes/token':>12s} {'unknown':>9s} {'round trip':>11s}"]
    for kind, m in results.items():
        rt = f"{m['round_trip_rate']:.3f}" + ("" if m["round_trip_promised"] else " (n/a)")
        lines.append(f"  {kind:10s} {m['vocab_size']:7d} {m['tokens_per_word']:12.3f} {m['bytes_per_token']:12.3f} {m['unknown_rate']:9.4f} {rt:>11s}")
    return "\n".join(lines)


def summary(stage, result: dict) -> str:
    return format_metrics({stage.key["kind"]: result})


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    m = read_record(out / "metrics.json")
    c = params.checks
    rate = float(m["unknown_rate"])
    limit = c.char_max_unknown_rate if stage.key.get("kind") == "char" else c.tokenizer_max_unknown_rate
    return [CheckOutcome("unknown_rate", rate <= limit, f"unknown rate {rate:.4%} (at most {limit:.2%})",
                         metadata={"unknown_rate": rate, "limit": limit})]


def metadata(stage, params: Params, out: Path) -> dict:
    m = read_json_or_empty(out / "metrics.json")
    meta = {k: m[k] for k in ("vocab_size", "tokens_per_word", "bytes_per_token", "unknown_rate", "round_trip_rate") if k in m}
    if m.get("architectures"):
        meta["used_by"] = ", ".join(m["architectures"])
    kind = stage.key.get("kind", "")
    meta.update(charts(out, {"fertility": f"{kind} tokens per word", "token_lengths": f"{kind} vocabulary entry lengths"}))
    return meta


def declare(ctx) -> None:
    """A tokenizer stage per kind in tokenizer.kinds and per kind a recipe's objective reads."""
    params, rel = ctx.params, ctx.rel
    for kind in ctx.tokenizer_kinds():
        ctx.add(Stage(
            name=f"tokenizer_{kind}", kind="tokenizer",
            description=f"The {kind} tokenizer trained on the clean corpus's train split; tokenizer.json that "
                        "transformers loads, metrics.json (tokens per word, bytes per token, unknown rate).",
            command=("tokenizer", "--kind", kind), upstream=(ctx.corpus_stage,) if ctx.corpus_stage else (),
            deps=(ctx.corpus,),
            params=("tokenizer.input", "tokenizer.max_training_documents", f"tokenizer.{kind}", "split"),
            outputs=(Output(rel.output(layout.tokenizer_dir(params, kind), "tokenizer.output")),
                     Output(rel(metrics_path(layout.tokenizer_dir(params, kind))), kind="metrics")), key={"kind": kind},
        ))


KIND = StageKind(
    declare=declare,
    name="tokenizer", record="metrics.json", group="tokenizers",
    code=("src/lmforge/tokenization",),
    tools=frozenset({"huggingface", "json"}),
    run=run, runner="lmforge.tokenization.tokenizer_stage:run_tokenizer", summary=summary, check=check, metadata=metadata,
    checks=(CheckSpec("unknown_rate", "unknown tokens per token on the validation split <= checks.tokenizer_max_unknown_rate "
                                      "(char: words outside ELMo's output vocabulary <= checks.char_max_unknown_rate)"),),
)
