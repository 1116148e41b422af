"""The texts a command reads: an argument, a file (plain text: one per line; ``.csv``, ``.tsv``,
``.jsonl``: a table) or standard input (``-``), and the tables ``lmforge predict`` writes."""

from __future__ import annotations

import sys
from pathlib import Path

from ..artifacts import atomic_write_text
from .loading import InferenceError

TEXT_COLUMNS = ("text", "sentence", "sentence1", "question")
PAIR_COLUMNS = ("text_pair", "sentence2", "passage")


def _table(path: Path):
    import pandas as pd

    try:
        if path.suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
    except ValueError as exc:
        raise InferenceError(f"{path}: not a readable {path.suffix[1:]} table ({exc})") from exc


def read_inputs(text: str | None, file: str | None) -> tuple[list[str], list[str | None] | None]:
    """(texts, pairs or None) from ``text`` (``-``: standard input, one per line) or ``file``."""
    if text is not None and file is not None:
        raise InferenceError("give a text or --file, not both")
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise InferenceError(f"{path}: no such file")
        if path.suffix in (".csv", ".tsv", ".jsonl"):
            frame = _table(path)
            column = next((c for c in TEXT_COLUMNS if c in frame.columns), None)
            if column is None:
                raise InferenceError(f"{path}: no text column (one of {', '.join(TEXT_COLUMNS)}); has {list(frame.columns)}")
            pair = next((c for c in PAIR_COLUMNS if c in frame.columns), None)
            texts = [str(t) for t in frame[column]]
            return texts, ([str(p) for p in frame[pair]] if pair else None)
        lines = path.read_text(encoding="utf-8").splitlines()
    elif text is None or text == "-":
        if text is None and sys.stdin.isatty():
            raise InferenceError("no input: give a text, --file, or pipe text into standard input")
        lines = sys.stdin.read().splitlines()
    else:
        return [text], None
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise InferenceError("no input: the text is empty")
    return texts, None


def write_predictions(rows: list[dict], path: str | None) -> str | None:
    """``rows`` to ``path`` (``.csv`` or ``.jsonl``); None: tab-separated lines to return for printing."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if path is None:
        return "\n".join(f"{r['label']}\t{r['score']:.4f}\t{r['text']}" for r in rows)
    p = Path(path)
    if p.suffix == ".jsonl":
        text = frame.to_json(orient="records", lines=True, force_ascii=False)
    elif p.suffix == ".csv":
        text = frame.to_csv(index=False)
    else:
        raise InferenceError(f"{p}: write .csv or .jsonl")
    atomic_write_text(p, text)  # whole or not at all, and never half over what was there
    return None
