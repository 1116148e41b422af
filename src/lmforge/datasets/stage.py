"""The dataset stage: an objective over its token store, measured (``stats.json``) and, in
static mode, written out (epoch 0's examples as Parquet). See docs/OBJECTIVES.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..artifacts import fingerprint, finished, staged_dir
from ..config import Params
from ..layout import dataset_dir, token_store_dir
from ..objectives.base import IGNORE_INDEX, ObjectiveError
from ..objectives.registry import tokenizer_kind
from ..progress import Progress
from .open import ObjectiveDataset, open_objective

_HIST_BINS = [0, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 1 << 62]


class StaticDataset:
    """The examples of a static-mode ``<split>.parquet``, as dicts of NumPy arrays."""

    def __init__(self, path: str | Path):
        self.table = pq.read_table(path)
        self.keys = [c for c in self.table.column_names if not c.startswith("shape:")]

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        row = self.table.slice(index, 1).to_pylist()[0]
        return {k: np.asarray(row[k], dtype=np.int64).reshape(row[f"shape:{k}"]) for k in self.keys}


def _examples_table(examples: list[dict[str, np.ndarray]]) -> pa.Table:
    cols: dict[str, list] = {}
    for key in examples[0]:
        arrays = [np.asarray(e[key]) for e in examples]
        cols[key] = [a.reshape(-1).astype(np.int64).tolist() for a in arrays]
        cols[f"shape:{key}"] = [list(a.shape) for a in arrays]
    return pa.table(cols)


def generic_statistics(examples: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Numbers every objective gets: lengths and how many positions carry a label."""
    lengths = np.array([len(e["input_ids"]) for e in examples])
    hist, _ = np.histogram(lengths, bins=_HIST_BINS)
    out: dict[str, Any] = {
        "examples_measured": len(examples),
        "input_tokens": int(lengths.sum()),
        "input_length": {"mean": round(float(lengths.mean()), 3), "min": int(lengths.min()), "max": int(lengths.max())},
        "input_length_histogram": {f"<{hi}" if hi < 1 << 62 else f">={lo}": int(c)
                                   for lo, hi, c in zip(_HIST_BINS, _HIST_BINS[1:], hist) if c},
    }
    if "labels" in examples[0]:
        labels = [np.asarray(e["labels"]) for e in examples]
        labelled = sum(int((lab != IGNORE_INDEX).sum()) for lab in labels)
        out["labelled_positions"] = labelled
        out["labels_per_input_token"] = round(labelled / max(1, int(lengths.sum())), 6)
        if "decoder_input_ids" in examples[0]:
            tl = np.array([len(lab) for lab in labels])
            out["target_length"] = {"mean": round(float(tl.mean()), 3), "min": int(tl.min()), "max": int(tl.max())}
    return out


def _fingerprint(params: Params, name: str) -> str:
    """The token store it reads (its manifest names the tokenizer and the corpus) and the settings."""
    store = token_store_dir(params, tokenizer_kind(name)) / "manifest.json"
    return fingerprint(name, store.read_text(encoding="utf-8") if store.exists() else None,
                       params.dataset.mode, params.dataset.seed, params.dataset.statistics_examples,
                       getattr(params.dataset, name).model_dump(mode="json"))


def run_dataset(params: Params, name: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The dataset stage for one objective: statistics, and the examples in static mode."""
    cfg = params.dataset
    out = dataset_dir(params, name)
    fp = _fingerprint(params, name)
    prev = finished(out / "stats.json", fp)
    if prev is not None:
        log(f"dataset {name}: up to date")
        return prev
    summary: dict[str, Any] = {
        "objective": name,
        "tokenizer_kind": tokenizer_kind(name),
        "mode": cfg.mode,
        "seed": cfg.seed,
        "config": getattr(cfg, name).model_dump(mode="json"),
        "lmforge_version": __version__,
        "fingerprint": fp,
        "splits": {},
    }
    with staged_dir(out) as tmp:
        for split in ("train", "validation"):
            objective = open_objective(params, name, split)
            n = len(objective)
            if n == 0:
                if split == "train":
                    raise ObjectiveError(f"{name}: the {split} split yields no examples (corpus too small for the sequence length?)")
                continue
            data = ObjectiveDataset(objective, seed=cfg.seed, epoch=0)
            measured = n if cfg.mode == "static" else min(n, cfg.statistics_examples)
            with Progress(measured, f"dataset {name} ({split})", "examples") as progress:
                examples = []
                for i in range(measured):
                    examples.append(data[i])
                    progress.update(i + 1)
            stats = {"examples_per_epoch": n, **generic_statistics(examples), **objective.statistics(examples)}
            if cfg.mode == "static":
                pq.write_table(_examples_table(examples), tmp / f"{split}.parquet", compression="zstd")
            summary["splits"][split] = stats
            log(f"dataset {name} ({split}): {n} examples per epoch, "
                f"{stats.get('labels_per_input_token', 0):.3f} labels per input token")
        (tmp / "stats.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _draw(params, name, summary, tmp, log)
    return summary


def _draw(params: Params, name: str, summary: dict[str, Any], out: Path, log: Callable[[str], None]) -> None:
    """The dataset's pictures: input lengths, and the realised noise against the configured one."""
    from ..charts import write_charts
    from ..charts.datasets import dataset_charts
    from .rates import NOISE

    noise = NOISE.get(name)
    figures = noise.figures(summary["splits"]["train"], getattr(params.dataset, name)) if noise else None
    write_charts(out, dataset_charts(summary, figures, params.checks.mask_rate_tolerance), log)
