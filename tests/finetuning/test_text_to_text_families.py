"""Tagging and span QA written as text: the targets, and the written entities read back as tags."""

from __future__ import annotations

import random

import pytest

from lmforge.finetuning.tasks import Answer, SpanQuestion, TaggedSentence, Task, TextPair
from lmforge.finetuning.text_to_text.pairs import (NO_ENTITY, as_pairs, entity_target, entity_types,
                                                       tags_from_text, text_prefix)


def tagged(words: str, tags: str) -> TaggedSentence:
    return TaggedSentence(tuple(words.split()), tuple(tags.split()))


def test_entities_are_written_in_order_with_their_type():
    s = tagged("copy src to dst with src again", "O B-PARAM O B-PARAM O B-LOC I-LOC")
    assert entity_target(s) == "PARAM: src ; PARAM: dst ; LOC: src again"
    assert entity_target(tagged("nothing here", "O O")) == NO_ENTITY


def test_written_entities_read_back_as_the_gold_tags_when_no_entity_also_stands_untagged_before_it():
    rng = random.Random(0)
    plain, names = ["a", "b", "c", "of"], ["src", "dst", "key", "Key"]  # entity words repeat, never untagged
    for _ in range(300):
        words: list[str] = []
        tags: list[str] = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.4:
                kind, length = rng.choice(["PARAM", "LOC"]), rng.randint(1, 3)
                words += [rng.choice(names) for _ in range(length)]
                tags += [f"B-{kind}"] + [f"I-{kind}"] * (length - 1)
            else:
                words.append(rng.choice(plain))
                tags.append("O")
        s = TaggedSentence(tuple(words), tuple(tags))
        assert tags_from_text(entity_target(s), s.words, ["PARAM", "LOC"]) == tags, (words, tags)
    # the format's limit: an entity's words standing untagged before it put the entity there
    s = tagged("copy dst to dst", "O O O B-PARAM")
    assert tags_from_text(entity_target(s), s.words, ["PARAM"]) == ["O", "B-PARAM", "O", "O"]


def test_what_cannot_be_placed_is_dropped_and_case_is_a_fallback():
    words = "set Key to key".split()
    assert tags_from_text("PARAM: key", words, ["PARAM"]) == ["O", "O", "O", "B-PARAM"]  # exact first
    assert tags_from_text("PARAM: KEY", words, ["PARAM"]) == ["O", "B-PARAM", "O", "O"]  # then any case
    # each word is one entity's at most: the second "key" takes the other case
    assert tags_from_text("PARAM: key ; PARAM: key", words, ["PARAM"]) == ["O", "B-PARAM", "O", "B-PARAM"]
    assert tags_from_text("PARAM: missing ; THING: to ; none ; : key ; PARAM:", words, ["PARAM"]) == ["O"] * 4
    # an entity written before one that comes earlier in the sentence is still placed
    assert tags_from_text("PARAM: key ; PARAM: set", words, ["PARAM"]) == ["B-PARAM", "O", "O", "B-PARAM"]


def test_tasks_become_pairs_with_t5_s_question_layout():
    q = SpanQuestion("Which value?", "The value given x is kept.", (Answer("x", 16), Answer("x is kept", 16)), "q1")
    qa = Task("qa", "", [], False, {"train": [q], "validation": [q], "test": [q]}, "qa", family="span_qa")
    assert as_pairs(qa)["test"] == [TextPair("Which value? context: The value given x is kept.", "x", "q1")]
    assert text_prefix(qa) == "question"
    s = tagged("copy src", "O B-PARAM")
    tagging = Task("t", "", ["O", "B-PARAM", "I-PARAM"], False, {"train": [s], "validation": [s], "test": [s]},
                   "params", family="tagging")
    assert as_pairs(tagging)["train"] == [TextPair("copy src", "PARAM: src", None)]
    assert entity_types(tagging) == ["PARAM"] and text_prefix(tagging) == "params"
    pairs = Task("g", "", [], False, {"train": [], "validation": [], "test": []}, "", family="generation")
    with pytest.raises(ValueError, match="generation tasks are not written as text here"):
        as_pairs(pairs)
