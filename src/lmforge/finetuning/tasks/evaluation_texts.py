"""The evaluation texts a pretraining corpus must not hold: each task's validation and test
examples as plain text (what the clean stage's decontamination registers and reports on).

The tasks built from the clean corpus itself (``CORPUS_TASKS``) draw their validation and test
examples from the corpus's held-out documents, which the clean stage registers directly; here
they are only rebuilt, from a cleaned folder, to count their examples for the report."""

from __future__ import annotations

from pathlib import Path

from .base import SPLIT_NAMES, TaskError

EVALUATION_SPLITS = tuple(s for s in SPLIT_NAMES if s != "train")


def example_text(example) -> str:
    """One example as the text a model reads: its parts on separate lines."""
    for fields in (("text", "text_pair"), ("question", "context"), ("source", "target")):
        if hasattr(example, fields[0]):
            return "\n".join(str(getattr(example, f)) for f in fields if getattr(example, f, None))
    if hasattr(example, "words"):
        return " ".join(example.words)
    raise TaskError(f"cannot read the text of a {type(example).__name__} example")


def split_texts(task) -> dict[str, list[str]]:
    """The validation and test examples of ``task`` as texts, by split."""
    return {s: [example_text(e) for e in task.splits[s]] for s in EVALUATION_SPLITS}


def external_texts(params, extra: list[str]) -> dict[str, list[str]]:
    """Source name -> evaluation texts, for the configured fine-tuning tasks that are not built
    from the corpus (folders, ``hf:`` datasets: their validation and test splits, uncapped) and
    the ``extra`` entries (a task spec as ``finetune.tasks`` takes, or a text file: one text per
    non-empty line; a ``.jsonl`` file: each line's ``text`` field)."""
    from .load import CORPUS_TASKS, load_task

    out: dict[str, list[str]] = {}
    for spec in list(params.finetune.tasks) + list(extra):
        spec = spec.strip()
        if spec in CORPUS_TASKS or spec in out:
            continue
        path = Path(spec).expanduser()
        if path.is_file():
            out[spec] = _file_texts(path)
            continue
        task = load_task(spec, params, max_train=1, max_eval=None)
        out[spec] = [t for texts in split_texts(task).values() for t in texts]
    return out


def _file_texts(path: Path) -> list[str]:
    import json

    texts = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read evaluation texts: {exc}") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                text = json.loads(line)["text"]
            except (ValueError, KeyError, TypeError):
                raise TaskError(f"{path}:{i}: expected a JSON object with a 'text' field") from None
            texts.append(str(text))
        else:
            texts.append(line)
    return texts


def corpus_task_texts(params, corpus: Path) -> dict[str, dict[str, list[str]] | str]:
    """Task -> split -> texts, for the configured tasks built from the corpus, built from the
    cleaned folder ``corpus`` as the fine-tuning stage will build them (uncapped); for a task that
    cannot be built from it (a corpus without the task's metadata), the reason."""
    from .load import CORPUS_TASKS, load_task

    moved = params.model_copy(update={"clean": params.clean.model_copy(update={"output": str(corpus)}),
                                      "tokenizer": params.tokenizer.model_copy(update={"input": None}),
                                      "quality": params.quality.model_copy(update={"enabled": False})})
    out: dict[str, dict[str, list[str]] | str] = {}
    for spec in dict.fromkeys(s.strip() for s in params.finetune.tasks):
        if spec in CORPUS_TASKS:
            try:
                out[spec] = split_texts(load_task(spec, moved, max_train=1, max_eval=None))
            except TaskError as exc:
                out[spec] = str(exc)
    return out
