"""The clean stage: the C4 rules, language ID, bad words, URL, line and near-duplicate dedup."""

from __future__ import annotations

from pathlib import Path

from ...config import Params
from ..kind import CheckOutcome, CheckSpec, StageKind, Table, charts, read_record, read_json_or_empty
from ..metrics import metrics_path
from ..stage import Output, Stage


def evaluation_sets(params: Params):
    """What decontamination removes overlap with: the held-out split, the configured tasks'
    evaluation examples (those not built from the corpus, with ``decontaminate.tasks``) and
    ``decontaminate.texts``; the corpus's own tasks are rebuilt from the output for the report."""
    from functools import partial

    from ...cleaning.decontaminate import EvaluationSets
    from ...finetuning.tasks.evaluation_texts import corpus_task_texts, external_texts

    d = params.clean.decontaminate
    configured = params if d.tasks else params.model_copy(
        update={"finetune": params.finetune.model_copy(update={"tasks": []})})
    return EvaluationSets(split=params.split, texts=external_texts(configured, d.texts),
                          corpus_tasks=partial(corpus_task_texts, params))


def run(params: Params, stage, log) -> dict:
    from ...cleaning.stage import run_clean

    evaluation = evaluation_sets(params) if params.clean.decontaminate.enabled else None
    result = run_clean(params.clean, log=log, executor=params.executor, evaluation=evaluation)
    return {"stats": result.stats, "seconds": result.seconds, "skipped": result.skipped, "execution": result.execution}


def summary(stage, result: dict) -> str:
    stats, seconds, skipped = result["stats"], result["seconds"], result["skipped"]
    lines = [
        f"clean -> {stats['params']['output']}" + (" (up to date, nothing to do)" if skipped else f" in {seconds:.1f}s"),
        f"  documents: {stats['documents_in']} in, {stats['documents_out']} out ({100 * stats['documents_kept_fraction']:.1f}% kept)",
        f"  bytes:     {stats['bytes_in']} in, {stats['bytes_out']} out ({100 * stats['bytes_kept_fraction']:.1f}% kept)",
        "  dropped documents by reason:",
    ]
    execution = result.get("execution")
    if execution:  # where the units ran: this machine's processes, or a Ray cluster's nodes
        where = sorted({h for ph in execution["phases"].values() for h in ph["hosts"]})
        lines.insert(1, f"  executor:  {execution['executor']} ({', '.join(where)})")
    for reason, d in sorted(stats["dropped"].items(), key=lambda kv: -kv[1]["documents"]):
        lines.append(f"    {reason:32s} {d['documents']:8d}  ({d['bytes']} bytes)")
    lines.append("  removed lines by reason:")
    for reason, n in sorted(stats["lines_removed"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {reason:32s} {n:8d}")
    if stats.get("sources"):  # the names tokenize.mixture weights
        lines.append("  kept documents by source (tokenize.mixture's names):")
        for src, d in list(stats["sources"].items())[:20]:
            lines.append(f"    {src:32s} {d['documents']:8d}  ({d['bytes']} bytes)")
        if len(stats["sources"]) > 20:
            lines.append(f"    ... and {len(stats['sources']) - 20} more (stats.json \"sources\")")
    skipped_inputs = stats["inputs"]["skipped_inputs"]
    if skipped_inputs:
        lines.append(f"  skipped inputs: {len(skipped_inputs)}")
        for s in skipped_inputs:
            lines.append(f"    {s['input']}: {s['error']} ({s['documents_read']} documents read before)")
    return "\n".join(lines)


_PRIOR_REASONS = ("prior_exact_duplicate", "prior_near_duplicate")


def check(stage, params: Params, out: Path) -> list[CheckOutcome]:
    c = params.checks
    stats = read_record(out / "stats.json")
    n_in, n_out = stats["documents_in"], stats["documents_out"]
    # copies of the documents of earlier outputs (clean.near_dedup.against) may be most of a new
    # crawl: the rates are of the documents that are not (a rule that removes too much is what
    # the check looks for)
    copies = sum(d["documents"] for r, d in stats["dropped"].items() if r in _PRIOR_REASONS)
    n_new = n_in - copies
    reasons = {r: d["documents"] / max(n_new, 1) for r, d in stats["dropped"].items() if r not in _PRIOR_REASONS}
    worst = max(reasons.items(), key=lambda kv: kv[1], default=("-", 0.0))
    kept = n_out / max(n_new, 1)
    of = f" of the {n_new} documents not copies of an earlier output" if copies else ""
    return [
        CheckOutcome("not_empty", n_out >= c.clean_min_documents,
                     f"{n_out} documents kept (at least {c.clean_min_documents} required)",
                     metadata={"documents_out": n_out, "documents_in": n_in}),
        CheckOutcome("drop_rates", kept >= c.clean_min_kept_fraction and worst[1] <= c.clean_max_reason_fraction,
                     f"kept {kept:.1%}{of} (>= {c.clean_min_kept_fraction:.1%}); largest drop reason {worst[0]} removed "
                     f"{worst[1]:.1%} (<= {c.clean_max_reason_fraction:.1%})",
                     metadata={"kept_fraction": kept, **{f"dropped_{r}": v for r, v in sorted(reasons.items())}}),
        _decontaminated(stats.get("decontamination")),
    ]


def _decontaminated(summary: dict | None) -> CheckOutcome:
    """No evaluation text overlaps a training document that is left (read back from the output)."""
    if summary is None:
        return CheckOutcome("decontaminated", True, "decontamination is off (clean.decontaminate.enabled: false)")
    left = {f"{t}/{s}": c[2] for t, v in summary["tasks"].items() if "skipped" not in v for s, c in v.items() if c[2]}
    documents = summary["training_documents_overlapping_after"]
    found = ", ".join(f"{t}: {c[1]} of {c[0]}" for t, v in summary["tasks"].items() if "skipped" not in v
                      for s, c in v.items() if s != "validation")
    return CheckOutcome(
        "decontaminated", documents == 0 and not left,
        f"{summary['training_documents_overlapping']} training documents overlapped an evaluation text and were "
        f"removed; {documents} overlap one now" + (f" (before, evaluation examples in the corpus: {found})" if found else ""),
        metadata={"documents_removed": summary["training_documents_overlapping"], "overlapping_after": documents,
                  **{f"still_overlapping_{k}": v for k, v in left.items()}})


def metadata(stage, params: Params, out: Path) -> dict:
    s = read_json_or_empty(out / "stats.json")
    if not s:
        return {}
    n_in = max(s["documents_in"], 1)
    return {
        "documents_in": s["documents_in"], "documents_out": s["documents_out"],
        "kept_fraction": float(s["documents_kept_fraction"]), "bytes_out": s["bytes_out"],
        "shards": len(s.get("shards", [])) if isinstance(s.get("shards"), list) else s.get("shards"),
        "drop_reasons": Table(("reason", "documents", "of input"), tuple(
            (r, d["documents"], f"{d['documents'] / n_in:.1%}")
            for r, d in sorted(s["dropped"].items(), key=lambda kv: -kv[1]["documents"]))),
        "lines_removed": Table(("reason", "lines"), tuple(sorted(s["lines_removed"].items(), key=lambda kv: -kv[1]))),
        **_decontamination_metadata(s.get("decontamination")),
        **charts(out, CHARTS),
    }


def _decontamination_metadata(summary: dict | None) -> dict:
    if summary is None:
        return {}
    rows = tuple((task, split, c[0], c[1], c[2]) for task, v in summary["tasks"].items() if "skipped" not in v
                 for split, c in v.items())
    return {"decontamination": Table(("task", "split", "examples", "in the corpus before", "after"), rows),
            "decontaminated_documents": summary["training_documents_overlapping"]}


# the pictures the stage draws (charts/corpus.py): file stem -> what it shows
CHARTS = {"drops": "documents and bytes removed by each rule", "lengths": "document lengths before and after cleaning",
          "languages": "languages seen by language ID", "near_duplicates": "near-duplicate cluster sizes",
          "decontamination": "evaluation examples found in the training documents, before and after"}


def declare(ctx) -> None:
    """The clean stage: its inputs are the local folders of clean.inputs, the earlier clean outputs
    it deduplicates against and, when decontamination is on, the task and text files it reads."""
    from ...finetuning.tasks import CORPUS_TASKS

    params, rel = ctx.params, ctx.rel
    local_inputs = [rel(i) for i in params.clean.inputs if i != "stdlib" and not i.startswith("hf:")]
    # earlier clean outputs whose documents the run drops (their saved signatures are read)
    local_inputs += [rel(p) for p in params.clean.near_dedup.against]
    clean_params: tuple[str, ...] = ("clean",)
    decon = params.clean.decontaminate
    if decon.enabled:  # the evaluation texts: the held-out split, the tasks, the listed files and folders
        clean_params += ("split", "finetune.tasks")
        evaluation = [*(params.finetune.tasks if decon.tasks else []), *decon.texts]
        local_inputs += [rel(t) for t in evaluation if t not in CORPUS_TASKS and not t.startswith("hf:")]
    ctx.add(Stage(
        name="clean", kind="clean",
        description="The C4 rules, language ID, bad-words filter, line and near-duplicate dedup over clean.inputs, "
                    "then decontamination against the evaluation texts; Parquet shards, stats.json (counts, drop "
                    "reasons), decontamination.json and samples of dropped documents.",
        command=("clean",), upstream=(), deps=tuple(dict.fromkeys(local_inputs)),
        params=clean_params, outputs=(Output(ctx.clean_out), Output(rel(metrics_path(ctx.clean_out)), kind="metrics")),
    ))


KIND = StageKind(
    declare=declare,
    name="clean", record="stats.json", group="corpus",
    code=("src/lmforge/cleaning", "src/lmforge/corpus", "src/lmforge/resources", "src/lmforge/finetuning/tasks"),
    tools=frozenset({"python", "parquet"}),
    run=run, runner="lmforge.cleaning.stage:run_clean", summary=summary, check=check, metadata=metadata,
    checks=(
        CheckSpec("not_empty", "the clean corpus keeps at least checks.clean_min_documents documents"),
        CheckSpec("drop_rates", "documents kept / read >= checks.clean_min_kept_fraction, and no single drop reason "
                                "removes more than checks.clean_max_reason_fraction of the documents read (those read "
                                "less the copies of earlier outputs' documents)"),
        CheckSpec("decontaminated", "no training document left shares a clean.decontaminate.ngram-word run with an "
                                    "evaluation text (the tasks' validation and test examples, the held-out split)"),
    ),
)
