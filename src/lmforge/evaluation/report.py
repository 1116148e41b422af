"""The leaderboard: one table, one metrics file and a few plots over every evaluated architecture.

Input is the per-architecture evaluation written by the evaluate stage,
``<evaluate.output>/evaluation/<arch>.json``; any part of it may be missing or null (an
architecture that was not fine-tuned, a run without validation), and then the matching cells are
empty rather than the report failing.

Two questions the report answers for every architecture:

- did pretraining *learn*? ``below_start``: the validation loss fell below the first logged train
  loss; ``below_unigram``: it fell below the loss of a context-free unigram predictor, so the model
  uses context at all;
- does the pretrained model *transfer*? On one fine-tuning task, ``beats_majority`` and ``beats_bow``:
  its accuracy is above the majority-class and bag-of-words baselines.

Everything is written atomically (a temporary file in the same folder, then ``os.replace``), so an
interrupted run never leaves a half-written report behind.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

log = logging.getLogger(__name__)

# Column -> meaning, in table order; the Markdown header paragraph is built from it.
COLUMNS: dict[str, str] = {
    "architecture": "model family",
    "objective": "pretraining objective",
    "tokenizer": "tokenizer",
    "parameters": "trainable parameters",
    "steps": "pretraining optimizer steps",
    "loss_start": "validation loss of the untrained model (the same measurement as val_loss); else the first train loss",
    "val_loss": "validation loss after pretraining (nats per predicted token)",
    "unigram_loss": "validation loss of a context-free unigram predictor (the baseline to beat)",
    "uniform_loss": "ln(vocabulary size), the loss of a uniform guess",
    "below_start": "val_loss < loss_start",
    "below_unigram": "val_loss < unigram_loss",
    "perplexity": "exp(val_loss)",
    "bits_per_byte": "validation loss in bits per UTF-8 byte of the predicted text",
    "unigram_bits_per_byte": "the unigram baseline in bits per byte",
    "token_accuracy": "share of predicted tokens (next / masked / span tokens) whose argmax is right",
    "task": "the fine-tuning task of the columns that follow",
    "task_accuracy": "fine-tuned accuracy on the task's test split (validation if no test)",
    "task_macro_f1": "fine-tuned macro-averaged F1 on the same split",
    "majority_accuracy": "accuracy of always predicting the most frequent class",
    "bow_accuracy": "accuracy of a bag-of-words classifier",
    "beats_majority": "task_accuracy > majority_accuracy",
    "beats_bow": "task_accuracy > bow_accuracy",
}
BOOLEAN_COLUMNS = ("below_start", "below_unigram", "beats_majority", "beats_bow")
TEXT_COLUMNS = ("architecture", "objective", "tokenizer", "task")
# Columns of the Markdown table (unigram_bits_per_byte stays in the CSV and the plot only).
TABLE_COLUMNS = [c for c in COLUMNS if c not in ("unigram_bits_per_byte",)]
FIGSIZE = (9.0, 5.0)
DPI = 100


# ----------------------------------------------------------------------------- loading


def load_evaluations(directory: str | os.PathLike, order: Sequence[str] | None = None) -> list[dict]:
    """Every ``<arch>.json`` of ``directory`` (the ``evaluation`` folder itself, or the evaluate
    stage's output folder containing it), sorted by architecture name, or in the order of
    ``order`` when given (architectures it does not name follow, sorted by name)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"evaluation directory not found: {directory}")
    files = sorted(directory.glob("*.json"))
    if not files and (directory / "evaluation").is_dir():
        directory = directory / "evaluation"
        files = sorted(directory.glob("*.json"))
    if not files:
        raise ValueError(f"no evaluation JSON files (<architecture>.json) in {directory}")
    evaluations = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read evaluation {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"evaluation {path} is not a JSON object")
        data.setdefault("architecture", path.stem)
        if not data["architecture"]:
            data["architecture"] = path.stem
        evaluations.append(data)
    rank = {name: i for i, name in enumerate(order or [])}
    evaluations.sort(key=lambda e: (rank.get(str(e["architecture"]), len(rank)), str(e["architecture"])))
    return evaluations


# ----------------------------------------------------------------------------- the table


def _get(mapping: Any, *keys: str) -> Any:
    """``mapping[k1][k2]...``, or None where any level is missing, null or not a mapping."""
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def _number(value: Any) -> float:
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _less(a: float, b: float) -> Any:
    """a < b, or pd.NA when either is unknown."""
    return pd.NA if math.isnan(a) or math.isnan(b) else bool(a < b)


def tasks(evaluations: Iterable[dict]) -> list[str]:
    """The fine-tuning tasks found, in order of first appearance."""
    found: list[str] = []
    for evaluation in evaluations:
        finetune = evaluation.get("finetune")
        if isinstance(finetune, dict):
            found.extend(t for t in finetune if t not in found)
    return found


def _task_row(evaluation: dict, task: str | None) -> dict[str, Any]:
    result = _get(evaluation, "finetune", task) if task else None
    metrics = _get(result, "test") or _get(result, "validation")
    accuracy = _number(_get(metrics, "accuracy"))
    majority = _number(_get(result, "baselines", "majority", "accuracy"))
    bow = _number(_get(result, "baselines", "bag_of_words", "accuracy"))
    return {
        "task": task,
        "task_accuracy": accuracy,
        "task_macro_f1": _number(_get(metrics, "macro_f1")),
        "majority_accuracy": majority,
        "bow_accuracy": bow,
        "beats_majority": _less(majority, accuracy),
        "beats_bow": _less(bow, accuracy),
    }


def leaderboard(evaluations: list[dict], task: str | None = None) -> pd.DataFrame:
    """One row per architecture (in the order given) with the columns of :data:`COLUMNS`.

    ``task`` picks the fine-tuning task of the downstream columns; by default the first task found.
    Booleans are pandas' nullable ``boolean``: <NA> where an input is missing."""
    available = tasks(evaluations)
    if task is None:
        task = available[0] if available else None
    elif available and task not in available:
        raise ValueError(f"task {task!r} is in no evaluation; tasks found: {', '.join(available)}")
    rows = []
    for evaluation in evaluations:
        validation = _get(evaluation, "pretrain", "validation")
        # the untrained model's validation loss: the same measurement as val_loss (the first train
        # loss may add auxiliary terms such as NSP, or sum ELMo's two directions)
        start = _get(evaluation, "pretrain", "validation_start", "loss")
        loss_start = _number(start if start is not None else _get(evaluation, "pretrain", "train_loss_first"))
        val_loss = _number(_get(validation, "loss"))
        unigram = _number(_get(validation, "unigram_loss"))
        rows.append({
            "architecture": str(evaluation.get("architecture")),
            "objective": evaluation.get("objective"),
            "tokenizer": evaluation.get("tokenizer"),
            "parameters": _number(evaluation.get("parameters")),
            "steps": _number(_get(evaluation, "pretrain", "steps")),
            "loss_start": loss_start,
            "val_loss": val_loss,
            "unigram_loss": unigram,
            "uniform_loss": _number(_get(validation, "uniform_loss")),
            "below_start": _less(val_loss, loss_start),
            "below_unigram": _less(val_loss, unigram),
            "perplexity": _number(_get(validation, "perplexity")),
            "bits_per_byte": _number(_get(validation, "bits_per_byte")),
            "unigram_bits_per_byte": _number(_get(validation, "unigram_bits_per_byte")),
            "token_accuracy": _number(_get(validation, "accuracy")),
            **_task_row(evaluation, task),
        })
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in COLUMNS:
        if column in BOOLEAN_COLUMNS:
            df[column] = df[column].astype("boolean")
        elif column in TEXT_COLUMNS:
            df[column] = df[column].astype(object).where(df[column].notna(), None)
        else:
            df[column] = pd.to_numeric(df[column], errors="coerce").astype("float64")
    for column in ("parameters", "steps"):
        df[column] = df[column].round().astype("Int64")
    return df


# ----------------------------------------------------------------------------- Markdown


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _count(value: float) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def _cell(column: str, value: Any) -> str:
    if _missing(value):
        return "–"
    if column in BOOLEAN_COLUMNS:
        return "✓" if bool(value) else "✗"
    if column == "parameters":
        return _count(float(value))
    if column == "steps":
        return f"{int(value):d}"
    if column == "perplexity":
        return f"{value:.4g}" if value < 1e6 else f"{value:.3e}"
    if isinstance(value, (int, float, np.number)):
        return f"{float(value):.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def format_leaderboard(df: pd.DataFrame) -> str:
    """The leaderboard as a Markdown table (numbers rounded, ✓/✗ for the booleans, – where unknown)."""
    columns = [c for c in TABLE_COLUMNS if c in df.columns]
    columns += [c for c in df.columns if c not in columns and c != "unigram_bits_per_byte"]
    numeric = {c for c in columns if c not in TEXT_COLUMNS and c not in BOOLEAN_COLUMNS}
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c in numeric else (":---:" if c in BOOLEAN_COLUMNS else "---") for c in columns) + "|",
    ]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(c, row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _flags(df: pd.DataFrame) -> list[str]:
    """A line per architecture whose validation loss is not below its start or its unigram baseline
    (or was not measured)."""
    lines = []
    for _, row in df.iterrows():
        name = row["architecture"]
        if _missing(row["val_loss"]):
            lines.append(f"- **{name}**: no validation loss recorded; learning cannot be checked.")
            continue
        problems = []
        if row["below_start"] is not pd.NA and not bool(row["below_start"]):
            problems.append(f"not below its start {row['loss_start']:.3f}")
        if row["below_unigram"] is not pd.NA and not bool(row["below_unigram"]):
            problems.append(f"not below its unigram baseline {row['unigram_loss']:.3f} "
                            "(the model does not yet use context)")
        if problems:
            lines.append(f"- **{name}**: validation loss {row['val_loss']:.3f} is " + " and ".join(problems) + ".")
    return lines


def _markdown(df: pd.DataFrame) -> str:
    task = next((t for t in df["task"] if t), None) if "task" in df else None
    parts = [
        "# Leaderboard",
        "",
        f"{len(df)} architecture(s), each pretrained with its own objective and evaluated on the "
        "validation split; losses are cross entropies in nats per predicted token, so they compare "
        "across architectures only when objective and tokenizer match (bits_per_byte is the "
        "tokenizer-independent one for objectives that predict every token). "
        + (f"The downstream columns are for the fine-tuning task `{task}`. " if task else
           "No architecture was fine-tuned, so the downstream columns are empty. ")
        + "✓/✗ mark the comparisons, – an unknown value.",
        "",
        "Columns:",
        "",
        *[f"- `{c}`: {COLUMNS[c]}" for c in TABLE_COLUMNS if c in df.columns],
        "",
        format_leaderboard(df).rstrip("\n"),
        "",
        "## Did pretraining learn?",
        "",
    ]
    flags = _flags(df)
    parts.extend(flags if flags else ["Every architecture's validation loss is below its start and its unigram baseline."])
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- metrics.json


def _metrics(df: pd.DataFrame) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for _, row in df.iterrows():
        flat: dict[str, float | int] = {}
        for column in df.columns:
            value = row[column]
            if column in TEXT_COLUMNS or _missing(value):
                continue
            if column in BOOLEAN_COLUMNS:
                flat[column] = int(bool(value))
            elif column in ("parameters", "steps"):
                flat[column] = int(value)
            else:
                flat[column] = float(value)
        metrics[str(row["architecture"])] = flat

    def count(column: str) -> int:
        return int(df[column].fillna(False).astype(bool).sum()) if len(df) else 0

    if "summary" in metrics:
        raise ValueError("an architecture named 'summary' collides with the metrics summary")
    metrics["summary"] = {
        "architectures": len(df),
        "finetuned": int(df["task_accuracy"].notna().sum()),
        **{column: count(column) for column in BOOLEAN_COLUMNS},
    }
    return metrics


# ----------------------------------------------------------------------------- history


def _resolve(path: Any, root: Path) -> Path | None:
    if not path:
        return None
    path = Path(str(path))
    return path if path.is_absolute() else root / path


def read_history(path: Path | None) -> pd.DataFrame | None:
    """A history CSV, one row per step (rows of the same step merged, empty cells NaN), or None
    when there is none."""
    if path is None or not path.is_file():
        if path is not None:
            log.warning("history %s not found; left out of the loss plots", path)
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as exc:  # EmptyDataError and ParserError are ValueErrors
        log.warning("history %s unreadable (%s); left out of the loss plots", path, exc)
        return None
    if "step" not in df.columns:
        log.warning("history %s has no step column; left out of the loss plots", path)
        return None
    df = df.apply(pd.to_numeric, errors="coerce").dropna(subset=["step"])
    # training and validation log separate rows at the same step: merge them
    return df.groupby("step", sort=True).first().reset_index()


def _loss_table(history: pd.DataFrame | None) -> pd.DataFrame | None:
    """step, train_loss[, val_loss]: the rows with a train loss."""
    if history is None or "train/loss" not in history.columns:
        return None
    table = pd.DataFrame({"step": history["step"].astype("int64"), "train_loss": history["train/loss"]})
    if "val/loss" in history.columns and history["val/loss"].notna().any():
        table["val_loss"] = history["val/loss"]
    return table[table["train_loss"].notna()].reset_index(drop=True)


# ----------------------------------------------------------------------------- plots


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _loss_curves(names: list[str], histories: dict[str, pd.DataFrame | None]) -> bytes:
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    colors = plt.get_cmap("tab10")
    plotted = False
    for i, name in enumerate(names):
        history = histories.get(name)
        if history is None:
            continue
        color = colors(i % 10)
        if "train/loss" in history.columns:
            train = history[history["train/loss"].notna()]
            if len(train):
                ax.plot(train["step"], train["train/loss"], color=color, linewidth=1.5, label=f"{name} train")
                plotted = True
        if "val/loss" in history.columns:
            val = history[history["val/loss"].notna()]
            if len(val):
                ax.plot(val["step"], val["val/loss"], color=color, linestyle=":", marker="o", markersize=4,
                        linewidth=1.5, label=f"{name} validation")
                plotted = True
    if plotted:
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss (nats per predicted token)")
        ax.set_title("Pretraining loss")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", ncol=2 if len(names) > 5 else 1)
    else:
        _empty(ax, "no training history found")
    return _png(fig)


def _bits_per_byte(df: pd.DataFrame) -> bytes:
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    if len(df) and (df["bits_per_byte"].notna().any() or df["unigram_bits_per_byte"].notna().any()):
        x = np.arange(len(df))
        width = 0.38
        model = ax.bar(x - width / 2, df["bits_per_byte"].to_numpy(float), width, label="model", color="tab:blue")
        unigram = ax.bar(x + width / 2, df["unigram_bits_per_byte"].to_numpy(float), width,
                         label="unigram baseline", color="tab:gray")
        for bars, values in ((model, df["bits_per_byte"]), (unigram, df["unigram_bits_per_byte"])):
            ax.bar_label(bars, labels=_labels(values.to_numpy(float)), fontsize="x-small", padding=2)
        ax.set_xticks(x, df["architecture"], rotation=30, ha="right")
        ax.set_xlim(-0.6, len(df) - 0.4)
        ax.set_ylabel("bits per byte (lower is better)")
        ax.set_title("Validation bits per byte: model vs unigram baseline")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend()
    else:
        _empty(ax, "no bits-per-byte measured")
    return _png(fig)


def _labels(values: np.ndarray) -> list[str]:
    return ["" if np.isnan(v) else f"{v:.2f}" for v in values]


def _uniform(values: np.ndarray) -> bool:
    known = values[~np.isnan(values)]
    return len(known) > 0 and np.allclose(known, known[0], rtol=0, atol=1e-9)


def _downstream(df: pd.DataFrame) -> bytes:
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    task = next((t for t in df["task"] if t), None) if len(df) else None
    accuracy = df["task_accuracy"].to_numpy(float)
    if task is None or not np.any(~np.isnan(accuracy)):
        _empty(ax, "no fine-tuned task")
        return _png(fig)
    x = np.arange(len(df))
    width = 0.6
    bars = ax.bar(x, accuracy, width, color="tab:blue", label="fine-tuned")
    ax.bar_label(bars, labels=_labels(accuracy), fontsize="x-small", padding=2)
    for position in x[np.isnan(accuracy)]:
        ax.text(position, 0.02, "not\nfine-tuned", ha="center", va="bottom", color="0.4", fontsize="small")
    for column, label, color, style in (("majority_accuracy", "majority baseline", "tab:red", "--"),
                                        ("bow_accuracy", "bag-of-words baseline", "tab:green", "-.")):
        values = df[column].to_numpy(float)
        if np.all(np.isnan(values)):
            continue
        if _uniform(values):
            ax.axhline(values[~np.isnan(values)][0], color=color, linestyle=style, linewidth=1.5, label=label)
        else:  # baselines differ per architecture (different encodings): one segment per bar
            known = ~np.isnan(values)
            ax.hlines(values[known], x[known] - width / 2, x[known] + width / 2, colors=color,
                      linestyles=style, linewidth=2, label=label)
    ax.set_xticks(x, df["architecture"], rotation=30, ha="right")
    ax.set_xlim(-0.6, len(df) - 0.4)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_title(f"Downstream accuracy on {task}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)


# ----------------------------------------------------------------------------- writing


def _atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "_"


def write_report(evaluations: list[dict], output_dir: str | os.PathLike, task: str | None = None,
                 root: str | os.PathLike = ".") -> dict[str, Any]:
    """Write the leaderboard (CSV, Markdown), metrics.json, the plots and ``plots/loss_<arch>.csv``
    into ``output_dir``; history paths are resolved against ``root`` unless absolute.

    Returns ``{"leaderboard": DataFrame, "files": [Path, ...]}``."""
    output_dir = Path(output_dir)
    root = Path(root)
    df = leaderboard(evaluations, task=task)
    names = [str(e.get("architecture")) for e in evaluations]
    histories = {name: read_history(_resolve(_get(e, "pretrain", "history"), root))
                 for name, e in zip(names, evaluations)}

    files = [
        _atomic_write(output_dir / "leaderboard.csv", df.to_csv(index=False).encode("utf-8")),
        _atomic_write(output_dir / "leaderboard.md", _markdown(df).encode("utf-8")),
        _atomic_write(output_dir / "metrics.json",
                      (json.dumps(_metrics(df), indent=2, ensure_ascii=False) + "\n").encode("utf-8")),
        _atomic_write(output_dir / "loss_curves.png", _loss_curves(names, histories)),
        _atomic_write(output_dir / "bits_per_byte.png", _bits_per_byte(df)),
        _atomic_write(output_dir / "downstream.png", _downstream(df)),
    ]
    for name in names:
        table = _loss_table(histories.get(name))
        if table is None:
            continue
        files.append(_atomic_write(output_dir / "plots" / f"loss_{_safe_name(name)}.csv",
                                   table.to_csv(index=False).encode("utf-8")))
    return {"leaderboard": df, "files": files}
