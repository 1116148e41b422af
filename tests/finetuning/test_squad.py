"""Span-QA tasks from SQuAD v1.1's files: the official JSON (several answers per question kept),
Hugging Face's JSONL, a folder of them through ``load_task``; every malformed file refused naming
the file and the entry (``data[i].paragraphs[j].qas[k]``) or line."""

from __future__ import annotations

import json

import pytest

from lmforge.finetuning.tasks import Answer, SpanQuestion, TaskError, load_task
from lmforge.finetuning.tasks.squad import is_squad_folder, read_squad_json, read_squad_jsonl

SUPER_BOWL = ("Super Bowl 50 was an American football game to determine the champion of the National Football League "
              "(NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos defeated the "
              "National Football Conference (NFC) champion Carolina Panthers 24\u201310 to earn their third Super Bowl "
              "title. The game was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at "
              "Santa Clara, California.")
WHERE_ANSWERS = ["Santa Clara, California", "Levi's Stadium",
                 "Levi's Stadium in the San Francisco Bay Area at Santa Clara, California."]


def qa(qid, question, context, *answers):
    return {"answers": [{"answer_start": context.index(a), "text": a} for a in answers], "question": question, "id": qid}


def squad_json(n_articles=3, paragraphs=4):
    """SQuAD v1.1's layout: articles of paragraphs of questions; the first question on the Super
    Bowl has three different answers (as dev's do); the others one each."""
    data = [{"title": "Super_Bowl_50", "paragraphs": [{"context": SUPER_BOWL, "qas": [
        qa("56be4db0acb8001400a502ec", "Which NFL team represented the AFC at Super Bowl 50?", SUPER_BOWL,
           "Denver Broncos", "Denver Broncos", "Denver Broncos"),
        qa("56be4db0acb8001400a502ef", "Where did Super Bowl 50 take place?", SUPER_BOWL, *WHERE_ANSWERS),
    ]}]}]
    for a in range(n_articles):
        paras = []
        for p in range(paragraphs):
            context = f"Article {a} paragraph {p} says that the river number {a * 10 + p} flows into the sea of Ugh {p}."
            paras.append({"context": context, "qas": [
                qa(f"q{a}-{p}-0", f"Where does river {a * 10 + p} flow?", context, f"the sea of Ugh {p}"),
                qa(f"q{a}-{p}-1", f"Which paragraph is this, {a}?", context, f"paragraph {p}"),
            ]})
        data.append({"title": f"Article_{a}", "paragraphs": paras})
    return {"version": "1.1", "data": data}


def write_json(path, obj, indent=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=indent), encoding="utf-8")
    return path


def test_squad_json_keeps_every_answer_and_squad_ids(tmp_path):
    path = write_json(tmp_path / "dev-v1.1.json", squad_json(1, 1))
    questions = read_squad_json(path)
    assert len(questions) == 4
    where = questions[1]
    assert where.id == "56be4db0acb8001400a502ef" and where.context == SUPER_BOWL
    assert [a.text for a in where.answers] == WHERE_ANSWERS
    assert all(SUPER_BOWL[a.start:a.start + len(a.text)] == a.text for a in where.answers)
    assert questions[0].answers == (Answer("Denver Broncos", 177),) * 3  # dev's repeats kept


def test_official_files_dev_is_tested_on_and_validation_carved_by_context(tmp_path):
    d = tmp_path / "squad"
    write_json(d / "train-v1.1.json", squad_json(4, 5))
    write_json(d / "dev-v1.1.json", squad_json(1, 2))
    assert is_squad_folder(d)
    task = load_task(str(d), max_train=None, max_eval=None)
    assert task.family == "span_qa" and task.label_names == [] and task.prefix == "question" and not task.pair
    assert task.info["metric"] == "f1"  # SQuAD's token F1
    assert len(task.splits["test"]) == 6 and task.info["files"]["test"].endswith("dev-v1.1.json")
    assert task.info["validation_carved_from_train"] and "test = dev-v1.1.json" in task.description
    train, validation = task.splits["train"], task.splits["validation"]
    assert len(train) + len(validation) == 42 and validation
    assert not {q.context for q in train} & {q.context for q in validation}  # a paragraph's questions together
    assert task.summary()["family"] == "span_qa" and task.label_counts("train") == {}


def test_dev_is_validation_when_there_is_a_test_file(tmp_path):
    d = tmp_path / "my_squad"
    write_json(d / "train.json", squad_json(2, 2))
    write_json(d / "dev-v1.1.json", squad_json(1, 1))
    write_json(d / "test.json", squad_json(0, 0))
    task = load_task(str(d), max_train=None)
    assert [len(task.splits[s]) for s in ("train", "validation", "test")] == [10, 4, 2]
    assert not task.info["validation_carved_from_train"]
    write_json(d / "validation.json", squad_json(0, 0))
    with pytest.raises(TaskError, match="dev-v1.1.json besides validation.json and test.json"):
        load_task(str(d), max_train=None)


def _hf_rows(obj, listed=False):
    """The questions of a SQuAD JSON as Hugging Face's datasets writes them (to_json: JSON lines)."""
    rows = []
    for article in obj["data"]:
        for paragraph in article["paragraphs"]:
            for q in paragraph["qas"]:
                answers = ([{"text": a["text"], "answer_start": a["answer_start"]} for a in q["answers"]] if listed else
                           {"text": [a["text"] for a in q["answers"]],
                            "answer_start": [a["answer_start"] for a in q["answers"]]})
                rows.append({"id": q["id"], "title": article["title"], "context": paragraph["context"],
                             "question": q["question"], "answers": answers})
    return rows


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_hugging_face_jsonl_with_answers_as_lists_or_objects(tmp_path):
    d = tmp_path / "squad_hf"
    _write_jsonl(d / "train.jsonl", _hf_rows(squad_json(3, 3)))
    _write_jsonl(d / "validation.jsonl", _hf_rows(squad_json(0, 0), listed=True))
    _write_jsonl(d / "test.jsonl", _hf_rows(squad_json(1, 1)))
    assert is_squad_folder(d)
    task = load_task(str(d), max_train=None)
    assert task.family == "span_qa" and [len(task.splits[s]) for s in ("train", "validation", "test")] == [20, 2, 4]
    where = task.splits["validation"][1]
    assert where == SpanQuestion("Where did Super Bowl 50 take place?", SUPER_BOWL,
                                 tuple(Answer(t, SUPER_BOWL.index(t)) for t in WHERE_ANSWERS),
                                 id="56be4db0acb8001400a502ef")
    assert read_squad_jsonl(d / "train.jsonl")[0].answers == (Answer("Denver Broncos", 177),) * 3


def _misplaced():
    obj = squad_json(3, 4)
    obj["data"][3]["paragraphs"][2]["qas"][0]["answers"][0]["answer_start"] += 1
    return obj


@pytest.mark.parametrize("case, message", [
    ("misplaced", r"train\.json: data\[3\]\.paragraphs\[2\]\.qas\[0\]\.answers\[0\]: answer 'the sea of Ugh 2' is not "
                  r"at character \d+ of the context"),
    ("bad_json", r"train\.json:7: not valid JSON"),
    ("no_answers", r"train\.json: data\[0\]\.paragraphs\[0\]\.qas\[1\]: no answers \(SQuAD v2"),
    ("no_context", r"train\.json: data\[1\]\.paragraphs\[0\]: 'context' must be a non-empty string"),
    ("qas_not_list", r"train\.json: data\[2\]\.paragraphs\[1\]: 'qas' must be a list"),
    ("not_squad", r"train\.json: expected SQuAD's JSON"),
    ("jsonl_lengths", r"train\.jsonl:3: 2 answer texts but 1 answer_start values"),
    ("jsonl_misplaced", r"train\.jsonl:2: answer 1: answer \"Levi's Stadium\" is not at character 0"),
    ("jsonl_bad_json", r"train\.jsonl:4: not valid JSON"),
    ("jsonl_missing", r"train\.jsonl:2: missing \['context'\]"),
    ("no_test", r"no test file \(test\.json, test\.jsonl or dev-v1\.1\.json\)"),
])
def test_malformed_squad_files_name_the_file_and_entry(tmp_path, case, message):
    d = tmp_path / "squad"
    train = squad_json(3, 4)
    write_json(d / "test.json", squad_json(1, 1))
    if case == "misplaced":
        write_json(d / "train.json", _misplaced())
    elif case == "bad_json":
        text = json.dumps(train, indent=1).splitlines()
        text[6] = text[6] + " oops"
        (d / "train.json").write_text("\n".join(text), encoding="utf-8")
    elif case == "no_answers":
        train["data"][0]["paragraphs"][0]["qas"][1]["answers"] = []
        write_json(d / "train.json", train)
    elif case == "no_context":
        del train["data"][1]["paragraphs"][0]["context"]
        write_json(d / "train.json", train)
    elif case == "qas_not_list":
        train["data"][2]["paragraphs"][1]["qas"] = {"id": "x"}
        write_json(d / "train.json", train)
    elif case == "not_squad":
        write_json(d / "train.json", [{"question": "q"}])
    elif case.startswith("jsonl"):
        rows = _hf_rows(train)
        if case == "jsonl_lengths":
            rows[2]["answers"]["answer_start"] = rows[2]["answers"]["answer_start"][:1]
            rows[2]["answers"]["text"] = ["Denver Broncos", "Broncos"]
        elif case == "jsonl_misplaced":
            rows[1]["answers"]["answer_start"][1] = 0
        elif case == "jsonl_missing":
            del rows[1]["context"]
        _write_jsonl(d / "train.jsonl", rows)
        if case == "jsonl_bad_json":
            lines = (d / "train.jsonl").read_text().splitlines()
            lines[3] = lines[3][:-1]
            (d / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif case == "no_test":
        write_json(d / "train.json", train)
        (d / "test.json").unlink()
    with pytest.raises(TaskError, match=message) as caught:
        load_task(str(d), max_train=None)
    assert str(d) in str(caught.value)
