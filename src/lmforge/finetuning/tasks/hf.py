"""A task from a Hugging Face dataset, ``hf:NAME[/CONFIG]``, read with the optional ``datasets``
library: ``ClassLabel`` ids become their names; a float ``label`` with non-integer values makes a
regression task (``hf:glue/stsb``; a split whose every label is -1, GLUE's hidden test labels, is
unlabelled); a test split without labels is replaced by validation, and validation is then carved
out of train. ``hf:glue/mnli_mismatched`` (and ``mnli_matched``) reads GLUE's ``mnli`` config, its
train split and its ``validation_mismatched`` / ``test_mismatched`` splits (Hugging Face's own
configs of those names hold no train split)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .base import (
    CARVE_FRACTION, SPLIT_NAMES, Example, Task, TaskError, carve_validation, check_task, label_name, sort_labels,
)
from .rows import LABEL_COLUMN, regression_target, rows_to_examples, text_columns

GLUE_DATASETS = ("glue", "nyu-mll/glue")
MNLI_VARIANTS = {"mnli_matched": "matched", "mnli_mismatched": "mismatched"}
FLOAT_DTYPES = ("float16", "float32", "float64")


def parse_hf_spec(spec: str) -> tuple[str, str | None]:
    """``hf:glue/sst2`` -> ("glue", "sst2"); ``hf:owner/name/config`` -> ("owner/name", "config");
    ``hf:owner/name?config=c`` -> ("owner/name", "c"); ``hf:imdb`` -> ("imdb", None)."""
    rest = spec[3:] if spec.startswith("hf:") else spec
    rest, _, query = rest.partition("?")
    rest = rest.strip("/")
    if not rest:
        raise TaskError(f"task {spec!r}: no dataset name after hf:")
    if query:
        options = dict(part.partition("=")[::2] for part in query.split("&") if part)
        unknown = set(options) - {"config"}
        if unknown:
            raise TaskError(f"task {spec!r}: unknown option(s) {sorted(unknown)}; only config=")
        return rest, options.get("config") or None
    parts = rest.split("/")
    if len(parts) == 1:
        return rest, None
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 3:
        return "/".join(parts[:2]), parts[2]
    raise TaskError(f"task {spec!r}: expected hf:NAME[/CONFIG] or hf:OWNER/NAME/CONFIG")


def hf_task(spec: str, seed: int = 0) -> Task:
    """Download (or read from the local cache) a Hugging Face dataset and build the task."""
    name, config = parse_hf_spec(spec)
    variant = MNLI_VARIANTS.get(config) if name in GLUE_DATASETS else None
    try:
        import datasets
    except ImportError:
        raise TaskError(f"task {spec!r} needs the optional 'datasets' library: pip install 'lmforge[hf]'") from None
    try:
        loaded = datasets.load_dataset(name, "mnli" if variant else config)
    except Exception as exc:  # network, unknown name or config: report what was asked
        raise TaskError(f"task {spec!r}: could not load dataset {name!r}"
                        f"{f' config {config!r}' if config else ''}: {type(exc).__name__}: {exc}") from None
    return task_from_hf(loaded, name=f"{name}/{config}" if config else name, source=spec, prefer=variant)


def _pick_split(available: Sequence[str], wanted: str, prefer: str | None = None) -> str | None:
    aliases = {"validation": ("validation", "dev", "valid", "val"), "test": ("test",), "train": ("train",)}[wanted]
    for alias in aliases:
        if alias in available:
            return alias
    prefixed = sorted(s for s in available if any(s.startswith(a + "_") for a in aliases))  # validation_matched
    if prefer is not None:  # validation_mismatched before validation_matched
        prefixed.sort(key=lambda s: not s.endswith("_" + prefer))
    return prefixed[0] if prefixed else None


def task_from_hf(dataset_dict, name: str, source: str | None = None, prefer: str | None = None) -> Task:
    """A task from a ``datasets.DatasetDict`` (or a dict of ``Dataset``): the text columns by
    GLUE's names, ``ClassLabel`` ids mapped to their names, rows labelled -1 dropped (a regression
    task, float labels with a non-integer value: splits labelled -1 throughout); when the test
    split is missing or unlabelled, validation becomes test and validation is carved out of
    train. ``prefer``: of suffixed splits (``validation_matched``, ``validation_mismatched``), the
    one ending ``_<prefer>``."""
    available = list(dataset_dict.keys())
    chosen = {s: _pick_split(available, s, prefer) for s in SPLIT_NAMES}
    if chosen["train"] is None:
        raise TaskError(f"{source or name}: no train split (has {available})")
    train_ds = dataset_dict[chosen["train"]]
    columns = text_columns(train_ds.column_names, f"{source or name} ({chosen['train']})")
    feature = train_ds.features.get(LABEL_COLUMN) if hasattr(train_ds, "features") else None
    if LABEL_COLUMN not in train_ds.column_names:
        raise TaskError(f"{source or name}: no {LABEL_COLUMN!r} column in {chosen['train']} (has {train_ds.column_names})")
    class_names = list(getattr(feature, "names", None) or []) or None
    regression = (class_names is None and getattr(feature, "dtype", None) in FLOAT_DTYPES
                  and any(not float(v).is_integer() for v in train_ds[LABEL_COLUMN] if v is not None))

    def label_map(value: Any, where: str) -> str | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value < 0):
            return None  # unlabelled (GLUE test: -1)
        if class_names is not None:
            if not isinstance(value, int) or value >= len(class_names):
                raise TaskError(f"{where}: label {value!r} outside the ClassLabel names {class_names}")
            return class_names[value]
        return label_name(value, where)

    splits: dict[str, list[Example]] = {}
    unlabelled: dict[str, int] = {}
    for split, key in chosen.items():
        if key is None:
            continue
        ds = dataset_dict[key]
        missing = [c for c in (*columns, LABEL_COLUMN) if c is not None and c not in ds.column_names]
        if missing:
            raise TaskError(f"{source or name} ({key}): missing column(s) {missing} (has {ds.column_names})")
        if regression and all(v == -1 for v in ds[LABEL_COLUMN]):  # GLUE's hidden test targets
            unlabelled[key] = len(ds)
            continue
        rows = _hf_rows(ds, [c for c in (*columns, LABEL_COLUMN) if c is not None])
        examples = rows_to_examples(rows, columns, f"{source or name}:{key}",
                                    label_map=regression_target if regression else label_map)
        unlabelled[key] = len(ds) - len(examples)
        splits[split] = examples
    moved = not splits.get("test")
    if moved:
        if not splits.get("validation"):
            raise TaskError(f"{source or name}: no labelled test split and no validation split to test on (has {available})")
        splits["test"] = splits.pop("validation")
    carved = not splits.get("validation")
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
    if regression:
        labels: list[str] = []
    else:
        labels = class_names if class_names is not None else sort_labels(e.label for ex in splits.values() for e in ex)
    first, second = columns
    layout = f"sentence pairs ({first}, {second})" if second else f"single texts ({first})"
    short = name.split("/")[-1]
    notes = []
    if moved:
        notes.append(f"test = the {chosen['validation']} split (the test split has no labels)")
    if carved:
        notes.append(f"validation carved from train ({CARVE_FRACTION:.0%})")
    if regression:
        targets = [e.label for ex in splits.values() for e in ex]
        kind = f"regression ({LABEL_COLUMN} from {min(targets):g} to {max(targets):g})"
    else:
        kind = f"{len(labels)}-way classification"
    task = Task(
        name=name,
        description=f"{name}: {kind} of {layout}" + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=labels,
        pair=second is not None,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", short).strip().lower() or "task",
        info={"source": source or name, "hf_splits": {s: k for s, k in chosen.items() if k},
              "unlabelled_rows_dropped": unlabelled, "test_from_validation": moved, "validation_carved_from_train": carved},
        family="regression" if regression else "classification",
    )
    check_task(task)
    return task


def _hf_rows(ds, columns: list[str]) -> Iterable[dict[str, Any]]:
    data = {c: list(ds[c]) for c in columns}  # one Arrow -> Python conversion per column
    for i in range(len(ds)):
        yield {c: data[c][i] for c in columns}