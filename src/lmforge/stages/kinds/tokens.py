"""The tokens stage: the clean corpus encoded with one tokenizer into memory-mapped stores."""

from __future__ import annotations

from pathlib import Path

from ... import layout
from ...config import ConfigError, Params
from ..kind import CheckOutcome, CheckSpec, StageKind, Table, charts, read_record, read_json_or_empty
from ..metrics import metrics_path
from ..stage import Output, Stage


def run(params: Params, stage, log) -> dict:
    from ...tokenization.tokens_stage import run_tokens

    return run_tokens(params, stage.key["kind"], log=log, executor=params.executor)


def summary(stage, result: dict) -> str:
    from ...tokenization.store import TokenStore

    return TokenStore(stage.output_path).summary()


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    m = read_record(out / "manifest.json")
    train = m["splits"].get("train", {})
    docs, tokens = int(train.get("documents", 0)), int(train.get("tokens", 0))
    return [CheckOutcome("train_not_empty", docs > 0 and tokens > 0, f"train split: {docs} documents, {tokens} tokens",
                         metadata={"documents": docs, "tokens": tokens})]


def metadata(stage, params: Params, out: Path) -> dict:
    meta = {}
    manifest = read_json_or_empty(out / "manifest.json")
    for split, s in (manifest.get("splits") or {}).items():
        meta[f"{split}_documents"] = s.get("documents")
        meta[f"{split}_tokens"] = s.get("tokens")
    mixture = (manifest.get("mixture") or {}).get("sources")
    if mixture:  # tokenize.mixture: what each source got in the train split
        meta["train_by_source"] = Table(
            ("source", "weight", "max_tokens", "tokens before", "tokens after", "share before", "target share", "realised share"),
            tuple((name, e["weight"], "-" if e["max_tokens"] is None else e["max_tokens"], e["tokens_before"], e["tokens_after"],
                   f"{e['share_before']:.1%}", f"{e['target_share']:.1%}", f"{e['realised_share']:.1%}")
                  for name, e in mixture.items()))
        meta.update(charts(out, {"mixture": f"{stage.key.get('kind', '')} train tokens by source: before, target, realised"}))
    return meta


def declare(ctx) -> None:
    """A token store per kind in tokenize.kinds (default: tokenizer.kinds) and per kind a recipe reads."""
    params, rel = ctx.params, ctx.rel
    store_kinds = list(params.tokenize.kinds or params.tokenizer.kinds)
    for kind in ctx.tokenizer_kinds():
        if kind not in store_kinds:
            store_kinds.append(kind)
    for kind in store_kinds:
        if f"tokenizer_{kind}" not in ctx.stages:
            raise ConfigError(f"tokenize.kinds: {kind!r} is not in tokenizer.kinds {params.tokenizer.kinds}")
        ctx.add(Stage(
            name=f"tokens_{kind}", kind="tokens",
            description=f"The clean corpus encoded with the {kind} tokenizer: memory-mapped token stores per split.",
            command=("tokenize", "--kind", kind), upstream=(ctx.corpus_stage or "clean", f"tokenizer_{kind}"),
            deps=(ctx.corpus, rel(layout.tokenizer_dir(params, kind))),
            params=("tokenize.batch_size", "tokenize.mixture", "tokenize.mixture_seed", "split"),
            outputs=(Output(rel.output(layout.token_store_dir(params, kind), "tokenize.output")),
                     Output(rel(metrics_path(layout.token_store_dir(params, kind))), kind="metrics")), key={"kind": kind},
        ))


KIND = StageKind(
    declare=declare,
    name="tokens", record="manifest.json", group="tokenizers",
    code=("src/lmforge/tokenization", "src/lmforge/splits.py"),
    tools=frozenset({"numpy"}),
    run=run, runner="lmforge.tokenization.tokens_stage:run_tokens", summary=summary, check=check, metadata=metadata,
    checks=(CheckSpec("train_not_empty", "the train split of the token store has documents and tokens"),),
)
