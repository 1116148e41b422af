"""Tagging and span QA written as text, for the sequence-to-sequence models fine-tuned text to text.

T5 casts every task as text in, text out; BART and Switch are fine-tuned the same way here when
their recipe's ``finetune.mode`` is ``text_to_text``. Each example becomes a ``TextPair`` whose
written output is read back into the family's own prediction, scored by the family's own metric:

- **span QA**: the source is ``<question> context: <context>`` under the prefix ``question``
  (T5's SQuAD layout ``question: ... context: ...``); the target is the first answer's text;
  the written text is the answer. A context longer than ``finetune.max_length`` is cut at its
  end (no windows): an answer past the cut cannot be written.
- **tagging**: the source is the sentence's words joined by spaces; the target lists its
  entities in order, each ``TYPE: its words``, joined by `` ; `` (``none`` for a sentence
  without one). A written entity is put back on the words at its first occurrence after the
  previous one (exact words, else case-insensitive), as ``B-TYPE`` / ``I-TYPE``; an entity of a
  type the task does not have, or whose words are not in the sentence, is dropped. The gold
  target reads back as the gold tags unless an entity's words also stand untagged between it
  and the entity before it (the list says what, not where): it is then placed there.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tasks import SpanQuestion, TaggedSentence, Task, TextPair

TEXT_TO_TEXT_FAMILIES = ("tagging", "span_qa")
NO_ENTITY = "none"
SEPARATOR = " ; "


def entity_target(sentence: TaggedSentence) -> str:
    """The entities of ``sentence`` as text: ``TYPE: words ; TYPE: words`` or ``none``."""
    from seqeval.metrics.sequence_labeling import get_entities  # seqeval imports scikit-learn: only when used

    found = get_entities(list(sentence.tags))
    if not found:
        return NO_ENTITY
    return SEPARATOR.join(f"{kind}: {' '.join(sentence.words[start:end + 1])}" for kind, start, end in found)


def _find(words: Sequence[str], wanted: list[str], start: int, taken: list[bool]) -> int | None:
    n = len(wanted)
    for same in (lambda a, b: a == b, lambda a, b: a.lower() == b.lower()):
        for i in range(start, len(words) - n + 1):
            if not any(taken[i:i + n]) and all(same(w, x) for w, x in zip(words[i:i + n], wanted)):
                return i
    return None


def tags_from_text(text: str, words: Sequence[str], types: Sequence[str]) -> list[str]:
    """One IOB2 tag per word of ``words`` from the written entity list ``text``."""
    tags = ["O"] * len(words)
    taken = [False] * len(words)
    after = 0
    for part in text.split(";"):
        kind, colon, rest = part.strip().partition(":")
        kind, wanted = kind.strip(), rest.split()
        if not colon or kind not in types or not wanted:
            continue
        at = _find(words, wanted, after, taken)
        if at is None:  # not after the previous entity: anywhere still free
            at = _find(words, wanted, 0, taken)
        if at is None:
            continue
        for i in range(at, at + len(wanted)):
            tags[i] = ("B-" if i == at else "I-") + kind
            taken[i] = True
        after = at + len(wanted)
    return tags


def entity_types(task: Task) -> list[str]:
    """The entity types of a tagging task's tags (``B-PARAM`` -> ``PARAM``), in order."""
    return list(dict.fromkeys(t[2:] for t in task.label_names if t[:2] in ("B-", "I-")))


def question_source(question: SpanQuestion) -> str:
    return f"{question.question} context: {question.context}"


def as_pairs(task: Task) -> dict[str, list[TextPair]]:
    """The splits of a tagging or span QA ``task`` as source/target pairs, ids kept."""
    if task.family == "span_qa":
        return {split: [TextPair(question_source(q), q.answers[0].text, q.id) for q in examples]
                for split, examples in task.splits.items()}
    if task.family == "tagging":
        return {split: [TextPair(" ".join(s.words), entity_target(s), s.id) for s in examples]
                for split, examples in task.splits.items()}
    raise ValueError(f"{task.name}: {task.family} tasks are not written as text here; text to text takes "
                     f"{', '.join(TEXT_TO_TEXT_FAMILIES)}")


def text_prefix(task: Task) -> str:
    """The text-to-text prefix: ``question`` for span QA (T5's), the task's own for tagging."""
    return "question" if task.family == "span_qa" else (task.prefix or "entities")
