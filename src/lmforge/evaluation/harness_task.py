"""The harness's default task, built offline from the held-out documents of the project's own
corpus: ``docstring_next``, "which of four sentences is the real next sentence of this docstring
paragraph". Each question takes a paragraph's first sentence as the context; its choices are the
paragraph's real second sentence and three second sentences of other documents, drawn and shuffled
by a seed, so the same documents always give the same questions.

It is written as a local lm-eval task: a JSONL file of ``{context, choices, gold}`` and a YAML task
(``dataset_path: json`` with the file as ``data_files``; lm-eval's multiple-choice output type,
``acc``, ``acc_norm`` and ``acc_bytes``), which lm-eval itself loads and scores.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ..artifacts import atomic_write_text
from .harness import HarnessError, Question

NAME = "docstring_next"
CHOICES = 4
# a sentence ends at . ! or ? followed by whitespace and a capital letter (the next sentence's start)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit + 1]
    return cut.rsplit(" ", 1)[0] if " " in cut else text[:limit]


def first_two_sentences(text: str, *, min_words: int = 4, max_chars: int = 300) -> tuple[str, str] | None:
    """(first sentence, second sentence) of the first paragraph (line) of ``text`` that has two
    sentences of at least ``min_words`` words each, both cut to ``max_chars``; None when none has."""
    for line in text.split("\n"):
        line = " ".join(line.split())
        parts = _SENTENCE_END.split(line)
        if len(parts) >= 2 and all(len(p.split(" ")) >= min_words for p in parts[:2]):
            return _cut(parts[0], max_chars), _cut(parts[1], max_chars)
    return None


def next_sentence_questions(documents: Iterable[tuple[str, str]], *, seed: int = 0, max_questions: int = 200,
                            choices: int = CHOICES) -> list[dict]:
    """``{context, choices, gold}`` rows from ``documents`` ((id, text)), one per document that has a
    two-sentence paragraph (documents sorted by id first; at most ``max_questions``, picked by the seed)."""
    pairs = []
    for doc_id, text in sorted(documents, key=lambda d: d[0]):
        found = first_two_sentences(text or "")
        if found is not None:
            pairs.append((doc_id, *found))
    if len(pairs) < choices:
        return []
    rng = random.Random(seed)
    picked = sorted(rng.sample(range(len(pairs)), min(max_questions, len(pairs))))
    rows = []
    for i in picked:
        _, context, answer = pairs[i]
        # distinct sentences of other documents (a sentence two documents share counts once)
        others = list(dict.fromkeys(pairs[j][2] for j in range(len(pairs)) if j != i and pairs[j][2] != answer))
        if len(others) < choices - 1:
            continue
        options = [answer] + rng.sample(others, choices - 1)
        order = list(range(choices))
        rng.shuffle(order)
        rows.append({"context": context, "choices": [options[k] for k in order], "gold": order.index(0)})
    return rows


def task_config(name: str, data_file: Path, cache_dir: Path) -> dict:
    """The lm-eval task of a JSONL file of ``{context, choices, gold}`` rows (absolute paths)."""
    return {
        "task": name,
        "dataset_path": "json",
        # the datasets library's cache of the JSON file kept beside it, not in the user's home
        "dataset_kwargs": {"data_files": {"test": str(data_file)}, "cache_dir": str(cache_dir)},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "context",
        "doc_to_choice": "choices",
        "doc_to_target": "gold",
        "target_delimiter": " ",
        "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True}
                        for m in ("acc", "acc_norm", "acc_bytes")],
        "metadata": {"version": 1.0},
    }


def write_task(rows: list[dict], directory: Path, name: str = NAME) -> Path:
    """``<directory>/<name>.jsonl`` and ``<directory>/<name>.yaml``; returns the YAML's path."""
    if not rows:
        raise HarnessError(f"{name}: no questions (the held-out documents have too few two-sentence paragraphs)")
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / f"{name}.jsonl"
    atomic_write_text(data, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    config = directory / f"{name}.yaml"
    atomic_write_text(config, yaml.safe_dump(task_config(name, data, directory / "hf-cache"), sort_keys=False))
    return config


def read_questions(config: Path) -> list[Question]:
    """The questions of a task :func:`write_task` wrote (its YAML's path; the JSONL beside it)."""
    data = Path(config).with_suffix(".jsonl")
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Question(r["context"], tuple(r["choices"]), int(r["gold"])) for r in rows]
