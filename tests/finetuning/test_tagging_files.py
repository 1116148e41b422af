"""Tagging tasks from files as the public datasets write them: CoNLL-2003's column files (its
original IOB1 tags rewritten as IOB2), JSONL with tokens and tags, a folder of them through
``load_task``; every malformed file refused naming the file and line."""

from __future__ import annotations

import json

import pytest

from lmforge.finetuning.tasks import TaggedSentence, TaskError, load_task
from lmforge.finetuning.tasks.tagging_files import is_tagging_folder, read_conll, read_tagged_jsonl

# the start of CoNLL-2003's eng.train: word, POS, chunk, NER, IOB1 (an I-X opens an entity; B-X
# only where two entities of one type touch)
CONLL_TRAIN = """\
-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O

-DOCSTART- -X- -X- O

Japan NNP I-NP I-LOC
began VBD I-VP O
the DT I-NP O
defence NN I-NP O
of IN I-PP O
their PRP$ I-NP O
Asian JJ I-NP I-MISC
Cup NNP I-NP I-MISC
title NN I-NP O
. . O O

China NNP I-NP I-LOC
Hong NNP I-NP B-LOC
Kong NNP I-NP I-LOC
talks NNS I-NP O
"""

CONLL_VALID = """\
-DOCSTART- -X- -X- O

CRICKET NNP I-NP O
- : O O
LEICESTERSHIRE NNP I-NP I-ORG
TAKE NNP I-NP O
OVER IN I-PP O
AT NNP I-NP O
TOP NNP I-NP O

LONDON NNP I-NP I-LOC
1996-08-30 CD I-NP O
"""

CONLL_TEST = """\
-DOCSTART- -X- -X- O

SOCCER NN I-NP O
- : O O
JAPAN NNP I-NP I-LOC
GET VB I-VP O
LUCKY NNP I-NP O
WIN NNP I-NP O
, , O O
CHINA NNP I-NP I-PER
IN IN I-PP O
SURPRISE DT I-NP O
DEFEAT NN I-NP O
. . O O

Nadim NNP I-NP I-PER
Ladki NNP I-NP I-PER
"""


def conll_folder(root, name="conll2003", suffix=".txt", valid=True):
    d = root / name
    d.mkdir(parents=True)
    (d / f"train{suffix}").write_text(CONLL_TRAIN, encoding="utf-8")
    if valid:
        (d / f"valid{suffix}").write_text(CONLL_VALID, encoding="utf-8")
    (d / f"test{suffix}").write_text(CONLL_TEST, encoding="utf-8")
    return d


def test_conll_columns_are_read_as_written_docstart_skipped(tmp_path):
    path = tmp_path / "train.conll"
    path.write_text(CONLL_TRAIN, encoding="utf-8")
    sentences = read_conll(path)
    assert [len(s.words) for s in sentences] == [9, 2, 2, 10, 4]
    first = sentences[0]
    assert first.words[:3] == ("EU", "rejects", "German") and first.tags[:3] == ("I-ORG", "O", "I-MISC")
    assert first.id == f"{path}:3"  # the line of its first word
    assert sentences[3].id == f"{path}:21"  # after the second -DOCSTART- and its blank line
    assert all("-DOCSTART-" not in s.words for s in sentences)


def test_a_conll_2003_folder_is_a_tagging_task_with_iob2_tags(tmp_path):
    d = conll_folder(tmp_path)
    assert is_tagging_folder(d)
    task = load_task(str(d), max_train=None)
    assert task.family == "tagging" and not task.pair and task.prefix == "conll2003"
    assert task.info["metric"] == "f1"  # entity F1
    assert task.label_names == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-PER"]
    train = task.splits["train"]
    assert train[0] == TaggedSentence(("EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."),
                                      ("B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"),
                                      id=f"{d / 'train.txt'}:3")
    assert train[1].tags == ("B-PER", "I-PER")
    assert train[3].tags[6:8] == ("B-MISC", "I-MISC")  # "Asian Cup": one entity
    assert train[4].tags == ("B-LOC", "B-LOC", "I-LOC", "O")  # China | Hong Kong: IOB1's B- kept
    assert [len(task.splits[s]) for s in ("train", "validation", "test")] == [5, 2, 2]
    assert task.splits["test"][0].tags[2] == "B-LOC" and task.splits["test"][0].tags[7] == "B-PER"
    assert task.info["tag_scheme"] == "IOB1, rewritten as IOB2" and not task.info["validation_carved_from_train"]
    assert task.info["tags_rewritten"] == {"train": 8, "validation": 2, "test": 3}
    assert task.label_counts("train")["B-MISC"] == 3 and task.summary()["family"] == "tagging"


def test_iob2_conll_files_and_a_carved_validation(tmp_path):
    d = tmp_path / "ner"
    d.mkdir()
    sentences = [f"Alice NNP B-NP B-PER\nvisited VBD B-VP O\nParis{i} NNP B-NP B-LOC\n" for i in range(20)]
    (d / "train.conll").write_text("-DOCSTART- -X- -X- O\n\n" + "\n".join(sentences), encoding="utf-8")
    (d / "test.conll").write_text("Bob\tB-PER\nsaw\tO\nRome\tB-LOC\n", encoding="utf-8")  # tabs, two columns
    task = load_task(str(d), max_train=None)
    assert task.family == "tagging" and task.info["tag_scheme"] == "IOB2"
    assert task.info["tags_rewritten"] == {"train": 0, "test": 0}
    assert task.info["validation_carved_from_train"]
    assert len(task.splits["validation"]) == 2 and len(task.splits["train"]) == 18
    assert task.splits["test"] == [TaggedSentence(("Bob", "saw", "Rome"), ("B-PER", "O", "B-LOC"),
                                                  id=f"{d / 'test.conll'}:1")]
    assert task.label_names == ["O", "B-LOC", "B-PER"]


def test_jsonl_tokens_and_tags_or_named_ner_tags(tmp_path):
    d = tmp_path / "wnut"
    d.mkdir()
    rows = [{"id": str(i), "tokens": ["@paul", "said", "hi", f"in{i}", "Berlin"],
             "tags": ["B-person", "O", "O", "O", "B-location"]} for i in range(10)]
    (d / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (d / "validation.jsonl").write_text(json.dumps({"tokens": ["New", "York"], "ner_tags": ["B-location", "I-location"]})
                                        + "\n", encoding="utf-8")
    (d / "test.jsonl").write_text("\n" + json.dumps({"tokens": ["Ann"], "ner_tags": ["I-person"]}) + "\n", encoding="utf-8")
    assert is_tagging_folder(d)
    task = load_task(str(d), max_train=None)
    assert task.family == "tagging" and [len(task.splits[s]) for s in ("train", "validation", "test")] == [10, 1, 1]
    assert task.splits["validation"][0].tags == ("B-location", "I-location")
    assert task.splits["test"][0] == TaggedSentence(("Ann",), ("B-person",), id=f"{d / 'test.jsonl'}:2")
    assert task.label_names == ["O", "B-location", "B-person", "I-location"]
    assert read_tagged_jsonl(d / "train.jsonl")[0].words[0] == "@paul"


@pytest.mark.parametrize("case, message", [
    ("one_column", r"train\.conll:4: one column \('rejects'\)"),
    ("bad_tag", r"train\.conll:5: tag 'E-MISC' \(last column\) is not O, B-X or I-X"),
    ("bare_prefix", r"test\.conll:2: tag 'B-' "),
    ("jsonl_lengths", r"train\.jsonl:2: 3 tokens but 2 tags"),
    ("jsonl_ids", r"train\.jsonl:1: 'ner_tags' holds integer class ids"),
    ("jsonl_bad_json", r"train\.jsonl:3: not valid JSON"),
    ("jsonl_bad_tag", r"train\.jsonl:1: tag 'PER' is not O, B-X or I-X"),
    ("no_test", r"no test file \(test\.conll or test\.txt or test\.jsonl\)"),
    ("empty", r"test\.conll: no sentences"),
    ("two_train", r"more than one train file \(train\.conll, train\.txt\)"),
])
def test_malformed_tagging_files_name_the_file_and_line(tmp_path, case, message):
    d = tmp_path / "task"
    d.mkdir()
    (d / "train.conll").write_text(CONLL_TRAIN, encoding="utf-8")
    (d / "test.conll").write_text(CONLL_TEST, encoding="utf-8")
    good = {"tokens": ["Ann", "ran"], "tags": ["B-PER", "O"]}
    if case == "one_column":
        (d / "train.conll").write_text(CONLL_TRAIN.replace("rejects VBZ I-VP O", "rejects"), encoding="utf-8")
    elif case == "bad_tag":
        (d / "train.conll").write_text(CONLL_TRAIN.replace("German JJ I-NP I-MISC", "German JJ I-NP E-MISC"),
                                       encoding="utf-8")
    elif case == "bare_prefix":
        (d / "test.conll").write_text("Ann B-PER\nran B-\n", encoding="utf-8")
    elif case.startswith("jsonl"):
        (d / "train.conll").unlink()
        lines = [good, {"tokens": ["a", "b", "c"], "tags": ["O", "O"]}]
        if case == "jsonl_ids":
            lines = [{"tokens": ["Ann", "ran"], "ner_tags": [1, 0]}]
        elif case == "jsonl_bad_json":
            lines = [good, good, "{oops"]
        elif case == "jsonl_bad_tag":
            lines = [{"tokens": ["Ann"], "tags": ["PER"]}]
        (d / "train.jsonl").write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
                                       encoding="utf-8")
    elif case == "no_test":
        (d / "test.conll").unlink()
    elif case == "empty":
        (d / "test.conll").write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf-8")
    elif case == "two_train":
        (d / "train.txt").write_text(CONLL_TRAIN, encoding="utf-8")
    with pytest.raises(TaskError, match=message) as caught:
        load_task(str(d), max_train=None)
    assert str(d) in str(caught.value)  # the file's path, not only its name


def test_a_byte_order_mark_and_windows_line_ends_are_read_through(tmp_path):
    path = tmp_path / "train.conll"
    path.write_bytes("\ufeff-DOCSTART- -X- -X- O\r\n\r\nAnn NNP B-NP I-PER\r\nran VBD B-VP O\r\n".encode("utf-8"))
    assert read_conll(path) == [TaggedSentence(("Ann", "ran"), ("I-PER", "O"), id=f"{path}:3")]
    jsonl = tmp_path / "train.jsonl"  # a line separator inside a token is no line end
    jsonl.write_text('{"tokens": ["a\u2028b", "c"], "tags": ["O", "B-X"]}\n{"tokens": ["d"], "tags": ["O"]}\n',
                     encoding="utf-8")
    assert [s.id for s in read_tagged_jsonl(jsonl)] == [f"{jsonl}:1", f"{jsonl}:2"]
