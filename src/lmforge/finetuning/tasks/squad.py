"""An extractive question-answering task (``family="span_qa"``) from SQuAD v1.1's files.

- SQuAD's JSON, as the official ``train-v1.1.json`` / ``dev-v1.1.json`` are written:
  ``{"version": ..., "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
  "answers": [{"text", "answer_start"}, ...]}]}]}]}``; every answer of a question is kept (dev
  has three per question, repeats included, as the official scoring takes the best over them).
- JSONL, one question per line as Hugging Face ``datasets`` writes SQuAD: ``id``, ``title``,
  ``context``, ``question``, ``answers: {"text": [...], "answer_start": [...]}`` (or ``answers``
  as a list of ``{"text", "answer_start"}``).

Each answer's text must stand at ``answer_start`` in the context; a question without answers
(SQuAD v2's unanswerable ones) is refused. A malformed file is refused with one ``TaskError``
naming the file and the entry (``data[3].paragraphs[2].qas[0]``) or line (``path:17``; for
invalid JSON the line of json's decode error). A question's ``id`` is SQuAD's id (what the
official scripts key predictions by); ``path:entry`` when the file gives none.

A folder holds ``train``, ``validation`` and ``test`` files (``.json`` or ``.jsonl``), or the
official names: ``train-v1.1.json`` is train; ``dev-v1.1.json`` is validation when the folder
has a test file, else the test split (SQuAD's own test set is hidden, as GLUE's test labels are:
the dev set is what is reported), and validation is then carved out of train. Validation is
carved by context: all the questions on one paragraph land on the same side, so validation
contexts are unseen in training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import CARVE_FRACTION, SPLIT_NAMES, Answer, SpanQuestion, Task, TaskError, carve_validation, check_task
from .files import first_jsonl_object, jsonl_objects, one_file

SQUAD_SUFFIXES = (".json", ".jsonl")
OFFICIAL_FILES = {"train": "train-v1.1.json", "dev": "dev-v1.1.json"}


def _text(value: Any, at: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{at}: {key!r} must be a non-empty string, got {value!r}")
    return value


def _answer(text: Any, start: Any, context: str, at: str) -> Answer:
    if not isinstance(text, str) or not text:
        raise TaskError(f"{at}: answer text must be a non-empty string, got {text!r}")
    if isinstance(start, bool) or not isinstance(start, int):
        raise TaskError(f"{at}: answer_start must be an integer, got {start!r}")
    found = context[start:start + len(text)] if start >= 0 else ""
    if found != text:
        raise TaskError(f"{at}: answer {text!r} is not at character {start} of the context (found {found!r})")
    return Answer(text, start)


def _question(qa: Any, context: str, at: str, where: str, answers: list[tuple[Any, Any, str]]) -> SpanQuestion:
    """A question from its fields; ``answers``: (text, start, where) of each answer."""
    question = _text(qa.get("question"), at, "question")
    if not answers:
        raise TaskError(f"{at}: no answers (SQuAD v2's unanswerable questions are not supported)")
    qid = qa.get("id")
    return SpanQuestion(question, context, tuple(_answer(t, s, context, a) for t, s, a in answers),
                        id=str(qid) if qid not in (None, "") else where)


def read_squad_json(path: str | Path) -> list[SpanQuestion]:
    """The questions of a SQuAD v1.1 JSON file, in the file's order."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: unreadable: {exc}") from None
    try:
        top = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    except ValueError as exc:  # a number of more digits than int() converts
        raise TaskError(f"{path}: not valid JSON ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise TaskError(f"{path}: not valid JSON (nested too deeply to read)") from None
    if not isinstance(top, dict) or not isinstance(top.get("data"), list):
        raise TaskError(f"{path}: expected SQuAD's JSON, an object with a 'data' list of articles")

    def items(value: Any, at: str, key: str) -> list:
        if not isinstance(value, list):
            raise TaskError(f"{path}: {at}: {key!r} must be a list, got {type(value).__name__}")
        return value

    def obj(value: Any, at: str) -> dict:
        if not isinstance(value, dict):
            raise TaskError(f"{path}: {at}: expected an object, got {type(value).__name__}")
        return value

    out = []
    for i, article in enumerate(top["data"]):
        a_at = f"data[{i}]"
        for j, paragraph in enumerate(items(obj(article, a_at).get("paragraphs"), a_at, "paragraphs")):
            p_at = f"{a_at}.paragraphs[{j}]"
            context = _text(obj(paragraph, p_at).get("context"), f"{path}: {p_at}", "context")
            for k, qa in enumerate(items(paragraph.get("qas"), p_at, "qas")):
                q_at = f"{p_at}.qas[{k}]"
                answers = []
                for m, answer in enumerate(items(obj(qa, q_at).get("answers"), q_at, "answers")):
                    ans_at = f"{q_at}.answers[{m}]"
                    answer = obj(answer, ans_at)
                    answers.append((answer.get("text"), answer.get("answer_start"), f"{path}: {ans_at}"))
                out.append(_question(qa, context, f"{path}: {q_at}", f"{path}:{q_at}", answers))
    if not out:
        raise TaskError(f"{path}: no questions")
    return out


def read_squad_jsonl(path: str | Path) -> list[SpanQuestion]:
    """The questions of a JSONL file, one per line as Hugging Face writes SQuAD."""
    path = Path(path)
    out = []
    for n, row in jsonl_objects(path):
        at = f"{path}:{n}"
        missing = [k for k in ("context", "question", "answers") if k not in row]
        if missing:
            raise TaskError(f"{at}: missing {missing} (found {sorted(row)})")
        context = _text(row["context"], at, "context")
        answers = row["answers"]
        if isinstance(answers, dict):
            texts, starts = answers.get("text"), answers.get("answer_start")
            if not isinstance(texts, list) or not isinstance(starts, list):
                raise TaskError(f"{at}: 'answers' must hold lists 'text' and 'answer_start'")
            if len(texts) != len(starts):
                raise TaskError(f"{at}: {len(texts)} answer texts but {len(starts)} answer_start values")
            pairs = [(t, s, f"{at}: answer {m}") for m, (t, s) in enumerate(zip(texts, starts))]
        elif isinstance(answers, list):
            if not all(isinstance(a, dict) for a in answers):
                raise TaskError(f"{at}: 'answers' as a list must hold {{'text', 'answer_start'}} objects")
            pairs = [(a.get("text"), a.get("answer_start"), f"{at}: answer {m}") for m, a in enumerate(answers)]
        else:
            raise TaskError(f"{at}: 'answers' must be an object of lists or a list of objects")
        out.append(_question(row, context, at, at, pairs))
    if not out:
        raise TaskError(f"{path}: no questions")
    return out


def read_squad(path: str | Path) -> list[SpanQuestion]:
    """A SQuAD file of either kind, by its suffix."""
    path = Path(path)
    return read_squad_jsonl(path) if path.suffix == ".jsonl" else read_squad_json(path)


def _split_file(directory: Path, stem: str) -> Path | None:
    official = OFFICIAL_FILES.get(stem)
    candidates = [directory / f"{stem}{s}" for s in SQUAD_SUFFIXES] + ([directory / official] if official else [])
    return one_file(directory, stem, candidates)


def is_squad_folder(directory: str | Path) -> bool:
    """Whether ``directory`` holds a SQuAD task: a split file in SQuAD's JSON (``train.json``,
    ``train-v1.1.json``, ...), or a ``train.jsonl`` whose first object has ``question``,
    ``context`` and ``answers``."""
    directory = Path(directory)
    names = [f"{s}.json" for s in (*SPLIT_NAMES, "dev")] + list(OFFICIAL_FILES.values())
    if any((directory / name).is_file() for name in names):
        return True
    first = first_jsonl_object(directory / "train.jsonl") if (directory / "train.jsonl").is_file() else None
    return first is not None and {"question", "context", "answers"} <= set(first)


def _carve_by_context(train: list[SpanQuestion]) -> tuple[list[SpanQuestion], list[SpanQuestion]]:
    """``carve_validation`` over the distinct contexts: a paragraph's questions stay together."""
    contexts = list(dict.fromkeys(q.context for q in train))
    if len(contexts) < 2:
        return carve_validation(train)
    proxies = [SpanQuestion("", c, ()) for c in contexts]
    _, held = carve_validation(proxies)
    held_contexts = {p.context for p in held}
    return [q for q in train if q.context not in held_contexts], [q for q in train if q.context in held_contexts]


def squad_folder_task(directory: str | Path) -> Task:
    """A span-QA task from ``directory``'s SQuAD files (the module docstring says which)."""
    directory = Path(directory)
    files = {"train": _split_file(directory, "train"), "validation": _split_file(directory, "validation"),
             "test": _split_file(directory, "test")}
    dev = _split_file(directory, "dev")
    notes = []
    if dev is not None:
        if files["test"] is None:
            files["test"] = dev
            notes.append(f"test = {dev.name} (SQuAD's test set is hidden)")
        elif files["validation"] is None:
            files["validation"] = dev
        else:
            raise TaskError(f"{directory}: {dev.name} besides {files['validation'].name} and {files['test'].name}; "
                            "keep two of them")
    if files["train"] is None:
        raise TaskError(f"{directory}: no train file (train.json, train.jsonl or {OFFICIAL_FILES['train']})")
    if files["test"] is None:
        raise TaskError(f"{directory}: no test file (test.json, test.jsonl or {OFFICIAL_FILES['dev']})")
    splits = {s: read_squad(p) for s, p in files.items() if p is not None}
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = _carve_by_context(splits["train"])
        notes.append(f"validation carved from train ({CARVE_FRACTION:.0%} of the contexts)")
    name = directory.resolve().name
    task = Task(
        name=name,
        description=f"{name}: extractive question answering (answers are spans of a context) from {directory}"
                    + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=[],
        pair=False,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix="question",
        info={"source": str(directory), "files": {s: str(p) for s, p in files.items() if p is not None},
              "validation_carved_from_train": carved,
              "answers": {s: sum(len(q.answers) for q in splits[s]) for s in SPLIT_NAMES}},
        family="span_qa",
    )
    check_task(task)
    return task
