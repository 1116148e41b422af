"""Fine-tuning tasks: labelled examples in train / validation / test splits.

A task spec names where the examples come from:

- ``"docstring_kind"`` (the default): built from the clean corpus itself. Every paragraph (line)
  of a clean document with at least ``min_words`` words is an example, cut to ``max_chars``
  characters at a word boundary; its label is what the document's docstring documents
  (``metadata["docstring_of"]``: ``module``, ``class`` or ``function``, from the AST when the
  stdlib corpus was read). An example's split is its *document's* split (``split_of`` on the
  document id, the function pretraining uses), so the test paragraphs come from documents
  that no model (and no tokenizer) saw in pretraining. Documents whose metadata has no
  ``docstring_of`` (other corpora) are skipped and counted in ``task.info``.
- a directory: ``train``, ``validation`` (optional: when missing, 10% of train is carved out
  by a stable hash of the text) and ``test`` files, each ``.csv``, ``.tsv`` or ``.jsonl``, with
  GLUE's column names: ``sentence`` or ``text`` for single sentences, ``sentence1`` +
  ``sentence2``, ``question`` + ``sentence``, ``question1`` + ``question2``, ``premise`` +
  ``hypothesis``, ``question`` + ``passage`` or ``text`` + ``text_pair`` for pairs, and
  ``label`` (names, or integers that become the names ``"0"``, ``"1"``, ...).
- ``"hf:NAME[/CONFIG]"`` (``hf:glue/sst2``; ``hf:OWNER/NAME/CONFIG``; or
  ``hf:NAME?config=CONFIG`` when the name has a slash): a Hugging Face dataset via the optional
  ``datasets`` library. ``ClassLabel`` ids become their names. When the test split has no labels
  (GLUE's are all -1) the validation split is the test split and validation is carved out of
  train, as above.

Every split may be capped (``max_train``, ``max_eval``) by a seeded sample that keeps the
examples' order, so the default run stays fast; the sizes before capping are in ``task.info``.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash
from ..errors import LmforgeError

DEFAULT_TASK = "docstring_kind"
SPLIT_NAMES = ("train", "validation", "test")
DOCSTRING_LABELS = ["module", "class", "function"]
CARVE_FRACTION = 0.1

# (first, second) text columns of sentence-pair tasks, tried in this order, then single columns
PAIR_COLUMNS: tuple[tuple[str, str], ...] = (
    ("sentence1", "sentence2"),
    ("question", "sentence"),
    ("question1", "question2"),
    ("premise", "hypothesis"),
    ("question", "passage"),
    ("text", "text_pair"),
)
SINGLE_COLUMNS: tuple[str, ...] = ("sentence", "text")
LABEL_COLUMN = "label"
FILE_SUFFIXES = (".csv", ".tsv", ".jsonl")


class TaskError(LmforgeError, ValueError):
    """A task that cannot be built: the message names the spec, file, column or row at fault."""


@dataclass(frozen=True)
class Example:
    text: str
    text_pair: str | None
    label: str
    id: str | None = None  # where it came from ("stdlib:json:JSONDecoder#2", "train.csv:17"); not part of the input


@dataclass
class Task:
    name: str
    description: str
    label_names: list[str]
    pair: bool
    splits: dict[str, list[Example]]  # "train", "validation", "test": all three, non-empty
    prefix: str  # the text-to-text prefix, e.g. "docstring kind"
    info: dict[str, Any] = field(default_factory=dict)  # provenance and sizes before capping

    def label_counts(self, split: str) -> dict[str, int]:
        """Examples per label in ``split``, every label listed (in ``label_names`` order)."""
        counts = Counter(e.label for e in self.splits[split])
        return {name: counts.get(name, 0) for name in self.label_names}

    def summary(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "labels": list(self.label_names),
            "pair": self.pair,
            "splits": {s: {"examples": len(self.splits[s]), "labels": self.label_counts(s)} for s in SPLIT_NAMES},
        }


# ----------------------------------------------------------------------------- entry point

_FROM_PARAMS = object()  # max_train default: params.finetune.max_train_examples, else 4000


def load_task(spec: str, params=None, *, seed: int = 0, max_train: int | None = _FROM_PARAMS,  # type: ignore[assignment]
              max_eval: int | None = 2000, min_words: int = 8, max_chars: int = 512) -> Task:
    """Build the task ``spec`` (see the module docstring).

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
    if spec == DEFAULT_TASK:
        if params is None:
            from ..config import load_params

            params = load_params()
        task = docstring_kind_task(params, min_words=min_words, max_chars=max_chars)
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
            raise TaskError(f"unknown task {spec!r}; a task is {DEFAULT_TASK!r}, a directory of "
                            "train/validation/test .csv/.tsv/.jsonl files, or hf:NAME[/CONFIG]")
    return cap_splits(task, max_train=max_train, max_eval=max_eval, seed=seed)


def cap_splits(task: Task, *, max_train: int | None, max_eval: int | None, seed: int = 0) -> Task:
    """Cap each split by a seeded sample that keeps the examples' order; sizes before the cap
    go to ``task.info["uncapped"]``."""
    task.info.setdefault("uncapped", {s: len(task.splits[s]) for s in SPLIT_NAMES})
    for split in SPLIT_NAMES:
        cap = max_train if split == "train" else max_eval
        examples = task.splits[split]
        if cap is not None and len(examples) > cap:
            keep = sorted(random.Random(f"{seed}:{task.name}:{split}").sample(range(len(examples)), cap))
            task.splits[split] = [examples[i] for i in keep]
    task.info["capped"] = {"max_train": max_train, "max_eval": max_eval, "seed": seed}
    check_task(task)
    return task


def check_task(task: Task) -> None:
    """Every split present and non-empty, every label known, pairs consistent."""
    for split in SPLIT_NAMES:
        if not task.splits.get(split):
            raise TaskError(f"task {task.name!r}: the {split} split is empty")
    known = set(task.label_names)
    if len(known) < 2:
        raise TaskError(f"task {task.name!r}: needs at least two labels, has {task.label_names}")
    for split, examples in task.splits.items():
        for e in examples:
            if e.label not in known:
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} has label {e.label!r}, "
                                f"not one of {task.label_names}")
            if (e.text_pair is not None) != task.pair:
                raise TaskError(f"task {task.name!r}: {split} example {e.id or e.text[:40]!r} "
                                f"{'lacks' if task.pair else 'has'} a second text")


# ----------------------------------------------------------------------------- the default task


def paragraphs(text: str, min_words: int, max_chars: int) -> list[tuple[int, str]]:
    """(line number, paragraph) of the lines with at least ``min_words`` words, each cut to
    ``max_chars`` characters at the last word boundary that fits."""
    out = []
    for i, line in enumerate(text.split("\n")):
        line = " ".join(line.split())
        if not line or len(line.split(" ")) < min_words:
            continue
        if len(line) > max_chars:
            cut = line[: max_chars + 1]
            line = cut.rsplit(" ", 1)[0] if " " in cut else line[:max_chars]
        out.append((i, line))
    return out


def docstring_kind_task(params, *, min_words: int = 8, max_chars: int = 512) -> Task:
    """The default task from the clean corpus (see the module docstring)."""
    import pyarrow.parquet as pq

    from ..splits import split_of
    from ..layout import corpus_dir

    if min_words < 1:
        raise TaskError(f"{DEFAULT_TASK}: min_words must be at least 1, got {min_words}")
    if max_chars < 16:
        raise TaskError(f"{DEFAULT_TASK}: max_chars must be at least 16, got {max_chars}")
    directory = corpus_dir(params)
    shards = sorted(directory.glob("shard-*.parquet"))
    if not shards:
        raise TaskError(f"{DEFAULT_TASK}: no clean shards (shard-*.parquet) in {directory}; run `lmforge clean` first")
    documents: list[tuple[str, str, str]] = []  # (id, label, text)
    unlabelled = 0
    for shard in shards:
        try:
            table = pq.read_table(shard, columns=["id", "text", "metadata"])
        except Exception as exc:  # pyarrow raises several types for unreadable or schema-less files
            raise TaskError(f"{shard}: cannot read the id, text and metadata columns: {exc}") from None
        for doc_id, text, metadata in zip(*(table.column(c).to_pylist() for c in ("id", "text", "metadata"))):
            try:
                meta = json.loads(metadata) if metadata else {}
            except ValueError as exc:
                raise TaskError(f"{shard}: document {doc_id!r}: metadata is not valid JSON ({exc})") from None
            label = meta.get("docstring_of") if isinstance(meta, dict) else None
            if label is None:
                unlabelled += 1
                continue
            if label not in DOCSTRING_LABELS:
                raise TaskError(f"{shard}: document {doc_id!r}: metadata docstring_of is {label!r}, "
                                f"expected one of {DOCSTRING_LABELS}")
            documents.append((doc_id, label, text or ""))
    if not documents:
        raise TaskError(f"{DEFAULT_TASK}: none of the {unlabelled} documents in {directory} has 'docstring_of' in its "
                        "metadata; re-run `lmforge clean` on the stdlib corpus (clean.inputs: [stdlib])")
    documents.sort(key=lambda d: d[0])  # independent of how the corpus was sharded
    splits: dict[str, list[Example]] = {s: [] for s in SPLIT_NAMES}
    doc_counts = Counter()
    for doc_id, label, text in documents:
        split = split_of(doc_id, params.split)
        doc_counts[split] += 1
        for line, paragraph in paragraphs(text, min_words, max_chars):
            splits[split].append(Example(paragraph, None, label, id=f"{doc_id}#{line}"))
    task = Task(
        name=DEFAULT_TASK,
        description=("3-way classification of Python-stdlib docstring paragraphs: is this paragraph from a "
                     "module's, a class's (its methods' docstrings included) or a function's docstring? "
                     f"Paragraphs of >= {min_words} words, cut to {max_chars} characters; split by document id "
                     "with the pretraining split, so test paragraphs come from documents unseen in pretraining."),
        label_names=list(DOCSTRING_LABELS),
        pair=False,
        splits=splits,
        prefix="docstring kind",
        info={"source": str(directory), "documents": dict(doc_counts), "unlabelled_documents": unlabelled,
              "min_words": min_words, "max_chars": max_chars},
    )
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise TaskError(f"{DEFAULT_TASK}: no paragraphs of >= {min_words} words in the {split} split "
                            f"({doc_counts[split]} documents of {directory} are in it)")
    return task


# ----------------------------------------------------------------------------- shared helpers


def text_columns(columns: Sequence[str], where: str) -> tuple[str, str | None]:
    """(text column, pair column or None) from GLUE-style column names."""
    present = set(columns)
    for first, second in PAIR_COLUMNS:
        if first in present and second in present:
            return first, second
    for single in SINGLE_COLUMNS:
        if single in present:
            return single, None
    expected = ", ".join(SINGLE_COLUMNS) + " (single) or " + ", ".join(f"{a}+{b}" for a, b in PAIR_COLUMNS) + " (pairs)"
    raise TaskError(f"{where}: no text column; expected {expected}; found {sorted(present)}")


def label_name(value: Any, where: str) -> str:
    """A label value as its name: integers (and integral floats) become ``"0"``, ``"1"``, ...,
    booleans ``"true"`` / ``"false"``, strings are kept (stripped)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise TaskError(f"{where}: missing label")
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        value = value.item()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        raise TaskError(f"{where}: label {value!r} is not a class (regression tasks are not supported)")
    if isinstance(value, str):
        name = value.strip()
        if not name:
            raise TaskError(f"{where}: empty label")
        if re.fullmatch(r"[-+]?\d*\.\d+|[-+]?\d+\.", name):  # "1.0" from a CSV column pandas wrote as floats
            return label_name(float(name), where)
        return name
    raise TaskError(f"{where}: label {value!r} is a {type(value).__name__}, expected a string or an integer")


def sort_labels(names: Iterable[str]) -> list[str]:
    """Integer names in numeric order, any other names alphabetically."""
    names = set(names)
    if all(re.fullmatch(r"-?\d+", n) for n in names):
        return sorted(names, key=int)
    return sorted(names)


def _text(value: Any, where: str, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise TaskError(f"{where}: missing {column!r}")
    if not isinstance(value, str):
        value = str(value)
    if not value.strip():
        raise TaskError(f"{where}: empty {column!r}")
    return value


def rows_to_examples(rows: Iterable[dict[str, Any]], columns: tuple[str, str | None], where: str,
                     label_map=None) -> list[Example]:
    """Examples from dict rows; ``where`` names the source (``file``); rows are numbered from 1."""
    first, second = columns
    out = []
    for n, row in enumerate(rows, start=1):
        at = f"{where}: row {n}"
        if LABEL_COLUMN not in row:
            raise TaskError(f"{at}: no {LABEL_COLUMN!r} column")
        raw = row[LABEL_COLUMN]
        label = label_map(raw, at) if label_map is not None else label_name(raw, at)
        if label is None:  # an unlabelled row (hf: -1), skipped
            continue
        pair = _text(row.get(second), at, second) if second is not None else None
        out.append(Example(_text(row.get(first), at, first), pair, label, id=f"{where}:{n}"))
    return out


def carve_validation(train: list[Example], fraction: float = CARVE_FRACTION, salt: str = "lmforge-finetune"
                     ) -> tuple[list[Example], list[Example]]:
    """(train, validation): the ``ceil(fraction * n)`` examples with the lowest stable hash of
    their text become validation (identical texts hash alike, so they land on the same side);
    both keep their original order."""
    if len(train) < 2:
        raise TaskError(f"cannot carve a validation split out of {len(train)} training example(s)")

    def key(e: Example) -> int:
        return xxhash.xxh64_intdigest(f"{salt}\x00{e.text}\x00{e.text_pair or ''}".encode("utf-8"))

    hashes = [key(e) for e in train]
    k = min(max(1, math.ceil(fraction * len(train))), len(train) - 1)
    threshold = sorted(hashes)[k - 1]
    held = [h <= threshold for h in hashes]
    if all(held):  # every text identical: hold out exactly k
        held = [i < k for i in range(len(train))]
    return [e for e, h in zip(train, held) if not h], [e for e, h in zip(train, held) if h]


# ----------------------------------------------------------------------------- folder tasks


def _split_file(directory: Path, split: str) -> Path | None:
    found = [directory / f"{split}{suffix}" for suffix in FILE_SUFFIXES if (directory / f"{split}{suffix}").exists()]
    if len(found) > 1:
        raise TaskError(f"{directory}: more than one {split} file ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def read_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of a .csv / .tsv / .jsonl file; errors name the file (and line)."""
    if path.suffix == ".jsonl":
        rows, columns = [], {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskError(f"{path}: unreadable: {exc}") from None
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise TaskError(f"{path}: line {n}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise TaskError(f"{path}: line {n}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
            columns.update(dict.fromkeys(row))
        return list(columns), rows
    import pandas as pd

    options = {"sep": "\t", "quoting": csv.QUOTE_NONE} if path.suffix == ".tsv" else {}
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8", **options)
    except pd.errors.EmptyDataError:
        raise TaskError(f"{path}: empty file (no header row)") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise TaskError(f"{path}: unreadable {path.suffix[1:].upper()}: {exc}") from None
    columns = [str(c) for c in frame.columns]
    return columns, frame.to_dict(orient="records")


def folder_task(directory: str | Path) -> Task:
    """A task from ``train`` / ``validation`` / ``test`` files in ``directory``."""
    directory = Path(directory)
    files = {s: _split_file(directory, s) for s in SPLIT_NAMES}
    for split in ("train", "test"):
        if files[split] is None:
            raise TaskError(f"{directory}: no {split} file ({' or '.join(split + s for s in FILE_SUFFIXES)})")
    columns = None
    splits: dict[str, list[Example]] = {}
    for split, path in files.items():
        if path is None:
            continue
        names, rows = read_rows(path)
        if columns is None:
            columns = text_columns(names, str(path))
        missing = [c for c in (*columns, LABEL_COLUMN) if c is not None and c not in names]
        if missing:
            raise TaskError(f"{path}: missing column(s) {missing} (found {names})")
        examples = rows_to_examples(rows, columns, str(path))
        if not examples:
            raise TaskError(f"{path}: no examples")
        splits[split] = examples
    carved = "validation" not in splits
    if carved:
        splits["train"], splits["validation"] = carve_validation(splits["train"])
    labels = sort_labels(e.label for ex in splits.values() for e in ex)
    first, second = columns
    name = directory.resolve().name
    layout = f"sentence pairs ({first}, {second})" if second else f"single texts ({first})"
    task = Task(
        name=name,
        description=f"{name}: {len(labels)}-way classification of {layout} from {directory}"
                    + (f"; validation carved from train ({CARVE_FRACTION:.0%})" if carved else ""),
        label_names=labels,
        pair=second is not None,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", name).strip().lower() or "task",
        info={"source": str(directory), "files": {s: str(p) for s, p in files.items() if p is not None},
              "columns": [c for c in columns if c], "validation_carved_from_train": carved},
    )
    check_task(task)
    return task


# ----------------------------------------------------------------------------- Hugging Face datasets


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
    try:
        import datasets
    except ImportError:
        raise TaskError(f"task {spec!r} needs the optional 'datasets' library: pip install 'lmforge[hf]'") from None
    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as exc:  # network, unknown name or config: report what was asked
        raise TaskError(f"task {spec!r}: could not load dataset {name!r}"
                        f"{f' config {config!r}' if config else ''}: {type(exc).__name__}: {exc}") from None
    return task_from_hf(loaded, name=f"{name}/{config}" if config else name, source=spec)


def _pick_split(available: Sequence[str], wanted: str) -> str | None:
    aliases = {"validation": ("validation", "dev", "valid", "val"), "test": ("test",), "train": ("train",)}[wanted]
    for alias in aliases:
        if alias in available:
            return alias
    prefixed = sorted(s for s in available if any(s.startswith(a + "_") for a in aliases))  # validation_matched
    return prefixed[0] if prefixed else None


def task_from_hf(dataset_dict, name: str, source: str | None = None) -> Task:
    """A task from a ``datasets.DatasetDict`` (or a dict of ``Dataset``): the text columns by
    GLUE's names, ``ClassLabel`` ids mapped to their names, rows labelled -1 dropped; when the
    test split is missing or unlabelled, validation becomes test and validation is carved out of
    train."""
    available = list(dataset_dict.keys())
    chosen = {s: _pick_split(available, s) for s in SPLIT_NAMES}
    if chosen["train"] is None:
        raise TaskError(f"{source or name}: no train split (has {available})")
    train_ds = dataset_dict[chosen["train"]]
    columns = text_columns(train_ds.column_names, f"{source or name} ({chosen['train']})")
    feature = train_ds.features.get(LABEL_COLUMN) if hasattr(train_ds, "features") else None
    if LABEL_COLUMN not in train_ds.column_names:
        raise TaskError(f"{source or name}: no {LABEL_COLUMN!r} column in {chosen['train']} (has {train_ds.column_names})")
    class_names = list(getattr(feature, "names", None) or []) or None

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
        rows = _hf_rows(ds, [c for c in (*columns, LABEL_COLUMN) if c is not None])
        examples = rows_to_examples(rows, columns, f"{source or name}:{key}", label_map=label_map)
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
    labels = class_names if class_names is not None else sort_labels(e.label for ex in splits.values() for e in ex)
    first, second = columns
    layout = f"sentence pairs ({first}, {second})" if second else f"single texts ({first})"
    short = name.split("/")[-1]
    notes = []
    if moved:
        notes.append(f"test = the {chosen['validation']} split (the test split has no labels)")
    if carved:
        notes.append(f"validation carved from train ({CARVE_FRACTION:.0%})")
    task = Task(
        name=name,
        description=f"{name}: {len(labels)}-way classification of {layout}" + (f"; {'; '.join(notes)}" if notes else ""),
        label_names=labels,
        pair=second is not None,
        splits={s: splits[s] for s in SPLIT_NAMES},
        prefix=re.sub(r"[_\-]+", " ", short).strip().lower() or "task",
        info={"source": source or name, "hf_splits": {s: k for s, k in chosen.items() if k},
              "unlabelled_rows_dropped": unlabelled, "test_from_validation": moved, "validation_carved_from_train": carved},
    )
    check_task(task)
    return task


def _hf_rows(ds, columns: list[str]) -> Iterable[dict[str, Any]]:
    data = {c: list(ds[c]) for c in columns}  # one Arrow -> Python conversion per column
    for i in range(len(ds)):
        yield {c: data[c][i] for c in columns}
