"""A tagging task's baseline, ``most_frequent_tag_baseline``: each word gets the tag it had most
often in training (``O`` for a word never seen there), scored on entities as the models are
(``metrics.entity_scores``, seqeval's)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..tasks import Task

OUTSIDE = "O"


def most_frequent_tag_baseline(task: Task, split: str = "test") -> dict[str, Any]:
    """Entity scores on ``split`` of tagging each word with its most frequent training tag
    (ties: the first in ``task.label_names``; a word unseen in training: ``O``)."""
    from .metrics import entity_scores

    counts: dict[str, Counter] = {}
    for sentence in task.splits["train"]:
        for word, tag in zip(sentence.words, sentence.tags):
            counts.setdefault(word, Counter())[tag] += 1
    order = {name: i for i, name in enumerate(task.label_names)}

    def tag_of(word: str) -> str:
        seen = counts.get(word)
        if not seen:
            return OUTSIDE
        return max(seen, key=lambda tag: (seen[tag], -order.get(tag, len(order))))

    sentences = task.splits[split]
    scores = entity_scores([[tag_of(w) for w in s.words] for s in sentences], [list(s.tags) for s in sentences])
    return {**scores, "split": split, "examples": len(sentences), "words_seen_in_train": len(counts)}
