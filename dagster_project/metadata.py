"""What the Dagster UI shows for each materialized stage, read from the files the stage wrote:
counts and drop reasons, tokenizer metrics, objective statistics, loss curves as images, links
to MLflow runs, the leaderboard."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from dagster import MetadataValue

from lmforge.config import Params
from lmforge.stages import Stage


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _image(path: Path, alt: str) -> MetadataValue | None:
    if not path.exists():
        return None
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return MetadataValue.md(f"![{alt}](data:image/png;base64,{data})")


def _table(rows: list[tuple], header: tuple[str, ...]) -> MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return MetadataValue.md("\n".join(lines))


def _numbers(d: dict, prefix: str = "") -> dict[str, float]:
    return {f"{prefix}{k}": float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def stage_metadata(stage: Stage, params: Params, root: Path, run_url) -> dict[str, Any]:
    """Metadata of ``stage``'s materialization; ``run_url(run_id)`` links an MLflow run."""
    out = Path(stage.paths[0])
    out = out if out.is_absolute() else root / out
    meta: dict[str, Any] = {"path": MetadataValue.path(str(out)), "command": stage.cli}
    kind = stage.kind
    if kind == "clean":
        s = _read(out / "stats.json")
        if s:
            n_in = max(s["documents_in"], 1)
            meta.update({"documents_in": s["documents_in"], "documents_out": s["documents_out"],
                         "kept_fraction": float(s["documents_kept_fraction"]), "bytes_out": s["bytes_out"],
                         "shards": len(s.get("shards", [])) if isinstance(s.get("shards"), list) else s.get("shards")})
            meta["drop_reasons"] = _table(
                [(r, d["documents"], f"{d['documents'] / n_in:.1%}") for r, d in sorted(s["dropped"].items(), key=lambda kv: -kv[1]["documents"])],
                ("reason", "documents", "of input"))
            meta["lines_removed"] = _table(sorted(s["lines_removed"].items(), key=lambda kv: -kv[1]), ("reason", "lines"))
    elif kind == "tokenizer":
        m = _read(out / "metrics.json")
        meta.update({k: m[k] for k in ("vocab_size", "tokens_per_word", "bytes_per_token", "unknown_rate", "round_trip_rate")
                     if k in m})
        if m.get("architectures"):
            meta["used_by"] = ", ".join(m["architectures"])
    elif kind == "tokens":
        m = _read(out / "manifest.json")
        for split, s in (m.get("splits") or {}).items():
            meta[f"{split}_documents"] = s.get("documents")
            meta[f"{split}_tokens"] = s.get("tokens")
    elif kind == "dataset":
        s = _read(out / "stats.json")
        train = (s.get("splits") or {}).get("train", {})
        meta.update(_numbers(train, "train/"))
        if s.get("config"):
            meta["config"] = MetadataValue.json(s["config"])
    elif kind == "pretrain":
        m = _read(out / "metrics.json")
        v, v0 = m.get("validation") or {}, m.get("validation_start") or {}
        meta.update({k: m[k] for k in ("parameters", "steps", "seconds", "train_loss_first", "train_loss_last") if k in m})
        meta.update(_numbers(v, "validation/"))
        if "loss" in v0:
            meta["validation/loss_at_start"] = float(v0["loss"])
        image = _image(out / "loss.png", f"{stage.key.get('arch')} loss")
        if image is not None:
            meta["loss_curve"] = image
        url = run_url(m.get("mlflow_run_id"))
        if url:
            meta["mlflow_run"] = MetadataValue.url(url)
    elif kind == "finetune":
        m = _read(out / "metrics.json")
        meta.update({k: m[k] for k in ("steps", "seconds", "train_loss_first", "train_loss_last") if k in m})
        meta.update(_numbers(m.get("test") or {}, "test/"))
        for name, b in (m.get("baselines") or {}).items():
            meta.update(_numbers({k: b[k] for k in ("accuracy", "macro_f1") if k in b}, f"baseline/{name}/"))
        url = run_url(m.get("mlflow_run_id"))
        if url:
            meta["mlflow_run"] = MetadataValue.url(url)
    elif kind == "evaluate":
        ev = _read(out)
        meta.update(_numbers((ev.get("pretrain") or {}).get("validation") or {}, "validation/"))
        for name, p in (ev.get("promotion") or {}).items():
            meta[f"registry/{name}"] = f"v{p['version']} {p['metric']}={p['value']:.4f} " + (
                "-> champion" if p["champion"] else "(champion unchanged)")
    elif kind == "report":
        board = out.parent / "leaderboard.md"
        if board.exists():
            meta["leaderboard"] = MetadataValue.md(board.read_text(encoding="utf-8"))
        for name in ("loss_curves", "bits_per_byte", "downstream"):
            image = _image(out.parent / f"{name}.png", name)
            if image is not None:
                meta[name] = image
    return meta
