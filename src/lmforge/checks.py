"""Data-quality checks on what each stage wrote, with the bounds of ``params.checks``.

Each kind of stage has a fixed list of checks (:data:`CHECKS`, known before anything runs, so
an orchestrator can declare them); :func:`run_checks` evaluates them on the stage's outputs on
disk. A *blocking* check that fails should stop the stages downstream of it (Dagster's
blocking asset checks do); a check with severity ``warn`` reports without blocking.

No Dagster import here: ``dagster_project/`` wraps these as asset checks.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .config import Params
from .stages import Stage


@dataclass(frozen=True)
class CheckSpec:
    name: str
    description: str
    blocking: bool = True
    severity: str = "error"  # error | warn


@dataclass
class CheckOutcome:
    name: str
    passed: bool
    description: str
    severity: str = "error"
    metadata: dict[str, Any] = field(default_factory=dict)


CHECKS: dict[str, list[CheckSpec]] = {
    "clean": [
        CheckSpec("not_empty", "the clean corpus keeps at least checks.clean_min_documents documents"),
        CheckSpec("drop_rates", "documents kept / read >= checks.clean_min_kept_fraction, and no single drop reason "
                                "removes more than checks.clean_max_reason_fraction of the documents read"),
    ],
    "tokenizer": [CheckSpec("unknown_rate", "unknown tokens per token on the validation split <= checks.tokenizer_max_unknown_rate "
                                            "(char: words outside ELMo's output vocabulary <= checks.char_max_unknown_rate)")],
    "tokens": [CheckSpec("train_not_empty", "the train split of the token store has documents and tokens")],
    "dataset": [CheckSpec("objective_statistics", "the realised mask / noise / target rate is within checks.mask_rate_tolerance "
                                                  "of the configured one; the train split has examples")],
    "pretrain": [CheckSpec("loss_finite_and_decreasing", "every logged training loss is finite and the last is below the first "
                                                         "by more than checks.loss_min_drop")],
    "finetune": [CheckSpec("loss_finite", "every logged fine-tuning loss is finite")],
    "evaluate": [
        CheckSpec("beats_unigram_baseline", "validation loss below the unigram baseline of the objective's targets",
                  blocking=False),
        CheckSpec("beats_majority_baseline", "downstream test accuracy above the majority-class baseline on every task",
                  blocking=False, severity="warn"),
    ],
    "report": [],
}


def _json(path: Path) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (the stage did not write it)")
    return json.loads(path.read_text(encoding="utf-8"))


def _losses(history: Path, column: str = "train/loss") -> list[float]:
    if not history.exists():
        raise FileNotFoundError(f"{history}: missing (the stage did not write it)")
    with open(history, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [float(r[column]) for r in rows if r.get(column) not in (None, "")]


def _clean(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    c = params.checks
    stats = _json(out / "stats.json")
    n_in, n_out = stats["documents_in"], stats["documents_out"]
    reasons = {r: d["documents"] / max(n_in, 1) for r, d in stats["dropped"].items()}
    worst = max(reasons.items(), key=lambda kv: kv[1], default=("-", 0.0))
    kept = n_out / max(n_in, 1)
    return [
        CheckOutcome("not_empty", n_out >= c.clean_min_documents,
                     f"{n_out} documents kept (at least {c.clean_min_documents} required)",
                     metadata={"documents_out": n_out, "documents_in": n_in}),
        CheckOutcome("drop_rates", kept >= c.clean_min_kept_fraction and worst[1] <= c.clean_max_reason_fraction,
                     f"kept {kept:.1%} (>= {c.clean_min_kept_fraction:.1%}); largest drop reason {worst[0]} removed "
                     f"{worst[1]:.1%} (<= {c.clean_max_reason_fraction:.1%})",
                     metadata={"kept_fraction": kept, **{f"dropped_{r}": v for r, v in sorted(reasons.items())}}),
    ]


def _tokenizer(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    m = _json(out / "metrics.json")
    c = params.checks
    rate = float(m["unknown_rate"])
    limit = c.char_max_unknown_rate if stage.key.get("kind") == "char" else c.tokenizer_max_unknown_rate
    return [CheckOutcome("unknown_rate", rate <= limit, f"unknown rate {rate:.4%} (at most {limit:.2%})",
                         metadata={"unknown_rate": rate, "limit": limit})]


def _tokens(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    m = _json(out / "manifest.json")
    train = m["splits"].get("train", {})
    docs, tokens = int(train.get("documents", 0)), int(train.get("tokens", 0))
    return [CheckOutcome("train_not_empty", docs > 0 and tokens > 0, f"train split: {docs} documents, {tokens} tokens",
                         metadata={"documents": docs, "tokens": tokens})]


# objective -> (statistic in stats.json's train split, the configured value it should be near)
_RATES: dict[str, tuple[str, Callable[[Any], float]]] = {
    "mlm": ("mask_rate", lambda cfg: cfg.mask_rate),
    "mlm_nsp": ("mask_rate", lambda cfg: cfg.mask_rate),
    "mlm_sop": ("mask_rate", lambda cfg: cfg.mask_rate),
    "knowledge_mlm": ("mask_rate", lambda cfg: cfg.mask_rate),
    "span_corruption": ("noise_fraction", lambda cfg: cfg.noise_density),
    "denoising": ("estimated_masked_fraction", lambda cfg: cfg.infill_ratio),
    "permutation": ("target_fraction", lambda cfg: 1.0 / cfg.partial_prediction_k),
}


def _dataset(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    objective = stage.key["objective"]
    stats = _json(out / "stats.json")
    train = stats["splits"].get("train", {})
    examples = int(train.get("examples_per_epoch", 0))
    meta: dict[str, Any] = {"examples_per_epoch": examples}
    ok = examples > 0
    parts = [f"{examples} train examples per epoch"]
    if objective in _RATES:
        key, configured = _RATES[objective]
        target = float(configured(getattr(params.dataset, objective)))
        realised = train.get(key)
        tol = params.checks.mask_rate_tolerance
        if realised is None:
            ok, parts = False, [*parts, f"stats.json has no {key}"]
        else:
            ok = ok and abs(float(realised) - target) <= tol
            parts.append(f"{key} {float(realised):.4f} vs configured {target:.4f} (tolerance {tol})")
            meta.update({key: float(realised), "configured": target, "tolerance": tol})
    return [CheckOutcome("objective_statistics", ok, "; ".join(parts), metadata=meta)]


def _pretrain(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    losses = _losses(out / "history.csv")
    finite = bool(losses) and all(math.isfinite(x) for x in losses)
    drop = params.checks.loss_min_drop
    decreasing = finite and losses[-1] < losses[0] - drop
    desc = (f"{len(losses)} logged losses, first {losses[0]:.4f}, last {losses[-1]:.4f}" if losses else "no logged loss")
    if not finite and losses:
        desc += f"; {sum(not math.isfinite(x) for x in losses)} not finite"
    return [CheckOutcome("loss_finite_and_decreasing", decreasing, desc,
                         metadata={"first": losses[0] if losses else None, "last": losses[-1] if losses else None,
                                   "min_drop": drop})]


def _finetune(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    losses = _losses(out / "history.csv")
    bad = sum(not math.isfinite(x) for x in losses)
    return [CheckOutcome("loss_finite", bool(losses) and bad == 0,
                         f"{len(losses)} logged losses, {bad} not finite", metadata={"logged": len(losses), "not_finite": bad})]


def _evaluate(stage: Stage, params: Params, out: Path) -> list[CheckOutcome]:
    ev = _json(out)
    v = (ev.get("pretrain") or {}).get("validation") or {}
    loss, unigram = v.get("loss"), v.get("unigram_loss")
    intrinsic = loss is not None and unigram is not None and loss < unigram
    tasks = {}
    for task, ft in (ev.get("finetune") or {}).items():
        acc = (ft.get("test") or {}).get("accuracy")
        majority = ((ft.get("baselines") or {}).get("majority") or {}).get("accuracy")
        tasks[task] = (acc, majority)
    downstream = bool(tasks) and all(a is not None and m is not None and a > m for a, m in tasks.values())
    return [
        CheckOutcome("beats_unigram_baseline", intrinsic,
                     f"validation loss {loss} vs unigram baseline {unigram}" if loss is not None else "no validation loss",
                     metadata={"validation_loss": loss, "unigram_loss": unigram}),
        CheckOutcome("beats_majority_baseline", downstream,
                     "; ".join(f"{t}: accuracy {a} vs majority {m}" for t, (a, m) in tasks.items()) or "no fine-tuned task",
                     severity="warn", metadata={f"{t}_accuracy": a for t, (a, _) in tasks.items()}),
    ]


_RUNNERS = {"clean": _clean, "tokenizer": _tokenizer, "tokens": _tokens, "dataset": _dataset,
            "pretrain": _pretrain, "finetune": _finetune, "evaluate": _evaluate}


def run_checks(stage: Stage, params: Params, root: str | Path = ".") -> list[CheckOutcome]:
    """Evaluate ``CHECKS[stage.kind]`` on the stage's outputs under ``root``. A missing or
    unreadable output fails every check of the stage with the reason, rather than raising."""
    runner = _RUNNERS.get(stage.kind)
    if runner is None:
        return []
    out = Path(stage.paths[0])
    out = out if out.is_absolute() else Path(root) / out
    try:
        return runner(stage, params, out)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        return [CheckOutcome(spec.name, False, f"could not read the stage's output: {exc}", spec.severity)
                for spec in CHECKS[stage.kind]]
