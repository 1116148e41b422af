"""``load_task``: the one entry point from a task spec to a checked, capped ``Task``."""

from __future__ import annotations

from pathlib import Path

from .base import Task, TaskError, cap_splits
from .docstring_kind import DEFAULT_TASK, docstring_kind_task
from .docstring_package import PACKAGE_TASK, docstring_package_task
from .docstring_params import PARAMS_TASK, docstring_params_task
from .docstring_qa import QA_TASK, docstring_qa_task
from .docstring_signature import SIGNATURE_TASK, docstring_signature_task
from .docstring_summary import SUMMARY_TASK, docstring_summary_task
from .folder import folder_task
from .glue import task_metric
from .hf import hf_task

# the tasks built from the clean corpus, by name
CORPUS_TASKS = {DEFAULT_TASK: docstring_kind_task, PACKAGE_TASK: docstring_package_task,
                SUMMARY_TASK: docstring_summary_task,
                PARAMS_TASK: docstring_params_task, SIGNATURE_TASK: docstring_signature_task,
                QA_TASK: docstring_qa_task}

# the corpus tasks that draw something at random, from load_task's seed
SEEDED_CORPUS_TASKS = (SIGNATURE_TASK,)

# the family of each corpus task (known without building it)
CORPUS_FAMILIES = {DEFAULT_TASK: "classification", PACKAGE_TASK: "classification", SIGNATURE_TASK: "classification",
                   PARAMS_TASK: "tagging", QA_TASK: "span_qa", SUMMARY_TASK: "generation"}


def task_family(spec: str) -> str:
    """The family of the task ``spec`` without reading its examples: a corpus task's own, a
    folder's from its files (as ``folder_task`` tells them), a dataset's (``hf:``) classification
    (regression shows only when it is loaded; both fit every architecture)."""
    from .folder import REGRESSION_GLUE
    from .generation_files import is_generation_folder
    from .glue import canonical_glue_name, glue_name
    from .squad import is_squad_folder
    from .tagging_files import is_tagging_folder

    spec = spec.strip()
    if spec in CORPUS_FAMILIES:
        return CORPUS_FAMILIES[spec]
    if spec.startswith("hf:"):
        return "regression" if glue_name(spec) == REGRESSION_GLUE else "classification"
    path = Path(spec).expanduser()
    if not path.is_dir():
        return "classification"  # load_task names what is wrong with it
    if is_squad_folder(path):
        return "span_qa"
    if is_tagging_folder(path):
        return "tagging"
    if is_generation_folder(path):
        return "generation"
    return "regression" if canonical_glue_name(path.resolve().name) == REGRESSION_GLUE else "classification"


_FROM_PARAMS = object()  # max_train default: params.finetune.max_train_examples, else 4000


def load_task(spec: str, params=None, *, seed: int = 0, max_train: int | None = _FROM_PARAMS,  # type: ignore[assignment]
              max_eval: int | None = 2000, min_words: int = 8, max_chars: int = 512) -> Task:
    """Build the task ``spec`` (the forms are listed in the module docstring).

    ``params``: the project ``Params`` (the default task reads its clean corpus and split
    settings; ``None`` loads ``params.yaml``). ``max_train`` / ``max_eval`` cap the train split
    and each of validation and test (``None``: no cap) by a sample seeded with ``seed``;
    ``max_train`` defaults to ``params.finetune.max_train_examples`` (4000 without it).
    ``min_words`` and ``max_chars`` apply to the default task's paragraphs.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise TaskError(f"task spec must be a non-empty string, got {spec!r}")
    spec = spec.strip()
    if max_train is _FROM_PARAMS:
        finetune = getattr(params, "finetune", None)
        max_train = getattr(finetune, "max_train_examples", 4000) if finetune is not None else 4000
    for name, cap in (("max_train", max_train), ("max_eval", max_eval)):
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise TaskError(f"{name} must be a positive integer or None, got {cap!r}")
    if spec in CORPUS_TASKS:
        if params is None:
            from ...config import load_params

            params = load_params()
        seeded = {"seed": seed} if spec in SEEDED_CORPUS_TASKS else {}  # the pair task draws its negatives
        task = CORPUS_TASKS[spec](params, min_words=min_words, max_chars=max_chars, **seeded)
    elif spec.startswith("hf:"):
        task = hf_task(spec, seed=seed)
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            task = folder_task(path)
        elif path.exists():
            raise TaskError(f"task {spec!r}: {path} is a file; a task folder holds train/validation/test files")
        elif "/" in spec or "\\" in spec or spec.startswith("."):
            raise TaskError(f"task {spec!r}: no such directory")
        else:
            raise TaskError(f"unknown task {spec!r}; a task is a corpus task ({', '.join(CORPUS_TASKS)}), a directory "
                            "of train/validation/test files (.csv/.tsv/.jsonl with GLUE's columns or GLUE's own .tsv "
                            "files: classification or regression; CoNLL .conll/.txt or JSONL tokens/tags: tagging; "
                            "SQuAD .json/.jsonl: span QA; .jsonl/.csv/.tsv with article/highlights, document/summary, "
                            "source/target, input/output, question/answer(s) or translation: generation), or "
                            "hf:NAME[/CONFIG]")
    task.info["metric"] = task_metric(spec, task.label_names, family=task.family,
                                      generation_kind=task.info.get("generation_kind"))
    return cap_splits(task, max_train=max_train, max_eval=max_eval, seed=seed)
