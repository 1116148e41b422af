"""Fine-tuning inputs: a task split encoded for one architecture with its trained tokenizer.

Each architecture gets the input layout its fine-tuning head reads, built from the special ids its
tokenizer kind saved (``Vocab.from_tokenizer``), never from token spellings; truncation keeps every
special token. The layouts, one per architecture, are listed in ``docs/FINETUNING.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..objectives.base import Vocab
from ..objectives.features import pad_batch
from ..chars import BOS_CHAR, EOS_CHAR, encode_word, marker
from ..tokenizer_kinds import ARCHITECTURE_TOKENIZER
from .tasks import Example, Task
from ..errors import LmforgeError

TEXT_TO_TEXT = frozenset({"t5", "switch", "bart"})
PAIR_FIELD = "sentence2"  # the text-to-text field name before the second text
XLNET_CLS_SEGMENT = 2


class FeatureError(LmforgeError, ValueError):
    """Inputs that cannot be built: unknown architecture, a tokenizer without a needed special
    token, a ``max_length`` too small for the special tokens, an unknown label."""


def text_to_text(arch: str) -> bool:
    """Whether ``arch`` fine-tunes text-to-text by default (t5, switch, bart)."""
    _check_arch(arch)
    return arch in TEXT_TO_TEXT


def default_mode(arch: str) -> str:
    return "text_to_text" if text_to_text(arch) else "classification"


def _check_arch(arch: str) -> None:
    if arch not in ARCHITECTURE_TOKENIZER:
        raise FeatureError(f"unknown architecture {arch!r}; known: {sorted(ARCHITECTURE_TOKENIZER)}")


# ----------------------------------------------------------------------------- tokenizers


@dataclass(frozen=True)
class LoadedTokenizer:
    directory: Path
    kind: str
    tokenizer: Any  # tokenizers.Tokenizer
    vocab: Vocab
    max_characters: int | None  # char kind only

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def tokenizer_dir_for(arch: str, tokenizer_dir: str | Path) -> Path:
    """The tokenizer directory of ``arch``: ``tokenizer_dir`` itself when it holds a
    ``tokenizer.json``, else ``tokenizer_dir/<kind>`` (the tokenizer stage's root)."""
    _check_arch(arch)
    d = Path(tokenizer_dir)
    if (d / "tokenizer.json").exists():
        return d
    kind = ARCHITECTURE_TOKENIZER[arch]
    if (d / kind / "tokenizer.json").exists():
        return d / kind
    raise FeatureError(f"{d}: no tokenizer.json (nor {d / kind}/tokenizer.json) for {arch} (a {kind} tokenizer); "
                       "run `lmforge tokenizer` first")


@lru_cache(maxsize=16)
def _load(directory: str, stamp: tuple[int, int], kind: str) -> LoadedTokenizer:
    from tokenizers import Tokenizer

    d = Path(directory)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    vocab = Vocab.from_tokenizer(d)
    width = None
    if kind == "char":
        if vocab.char_table is not None:
            width = int(vocab.char_table.shape[1])
        elif (d / "char_config.json").exists():
            width = int(json.loads((d / "char_config.json").read_text(encoding="utf-8"))["max_characters"])
        else:
            raise FeatureError(f"{d}: not a char tokenizer (no char_table.npy or char_config.json), which ELMo needs")
    return LoadedTokenizer(d, kind, tok, vocab, width)


def load_tokenizer(arch: str, tokenizer_dir: str | Path) -> LoadedTokenizer:
    """The trained tokenizer of ``arch``'s kind (cached while its tokenizer.json is unchanged)."""
    d = tokenizer_dir_for(arch, tokenizer_dir)
    st = (d / "tokenizer.json").stat()
    return _load(str(d.resolve()), (st.st_mtime_ns, st.st_size), ARCHITECTURE_TOKENIZER[arch])


def _require(loaded: LoadedTokenizer, arch: str, *roles: str) -> None:
    missing = [r for r in roles if getattr(loaded.vocab, r) is None]
    if missing:
        raise FeatureError(f"{arch}: the tokenizer in {loaded.directory} has no {', '.join(missing)} token")


def pad_id(arch: str, tokenizer_dir: str | Path) -> int:
    """The pad id to ``collate`` ``arch``'s examples with."""
    loaded = load_tokenizer(arch, tokenizer_dir)
    _require(loaded, arch, "pad")
    return int(loaded.vocab.pad)


def model_overrides(arch: str, tokenizer_dir: str | Path) -> dict[str, Any]:
    """Config overrides that make a preset agree with the tokenizer: its vocabulary size and the
    special ids the model itself uses (pad, eos, the decoder start)."""
    loaded = load_tokenizer(arch, tokenizer_dir)
    v = loaded.vocab
    out: dict[str, Any] = {"vocab_size": v.size}
    if arch in ("bert", "ernie"):
        out["pad_id"] = v.pad
    elif arch == "bart":
        _require(loaded, arch, "pad", "bos", "eos")
        out.update(pad_id=v.pad, bos_id=v.bos, eos_id=v.eos, decoder_start_id=v.eos)
    elif arch in ("t5", "switch"):
        _require(loaded, arch, "pad", "eos")
        out.update(pad_id=v.pad, eos_id=v.eos, decoder_start_id=v.pad)
    elif arch == "elmo":
        out["max_characters"] = loaded.max_characters
    return out


# ----------------------------------------------------------------------------- truncation


def fit(a: list, b: list | None, budget: int) -> tuple[list, list | None]:
    """Cut ``a`` (and ``b``) from the end until together they hold at most ``budget`` items,
    always from the longer one (``b`` on a tie), as transformers' ``longest_first``."""
    if b is None:
        return a[:budget], None
    excess = len(a) + len(b) - budget
    if excess <= 0:
        return a, b
    la, lb = len(a), len(b)
    for _ in range(excess):
        if la > lb:
            la -= 1
        else:
            lb -= 1
    return a[:la], b[:lb]


def _budget(arch: str, max_length: int, used: int) -> int:
    budget = max_length - used
    if budget < 1:
        raise FeatureError(f"{arch}: max_length {max_length} leaves no room for text after {used} special/prefix tokens")
    return budget


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


# ----------------------------------------------------------------------------- layouts


def _bert_like(arch, loaded, a, b, max_length):
    v = loaded.vocab
    _require(loaded, arch, "cls", "sep")
    a, b = fit(a, b, _budget(arch, max_length, 2 + (b is not None)))
    ids = [v.cls, *a, v.sep]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, v.sep]
        types += [1] * (len(b) + 1)
    return {"input_ids": _i64(ids), "token_type_ids": _i64(types)}


def gpt_delimiter(vocab: Vocab) -> int:
    """GPT's delimiter between the two texts of a pair: the sep token, else eos."""
    return vocab.sep if vocab.sep is not None else vocab.eos


def _gpt(arch, loaded, a, b, max_length):
    v = loaded.vocab
    _require(loaded, arch, "bos", "eos")
    a, b = fit(a, b, _budget(arch, max_length, 2 + (b is not None)))
    ids = [v.bos, *a]
    if b is not None:
        ids += [gpt_delimiter(v), *b]
    return {"input_ids": _i64([*ids, v.eos])}


def _transformer_xl(arch, loaded, a, b, max_length):
    v = loaded.vocab
    _require(loaded, arch, "eos")
    a, b = fit(a, b, _budget(arch, max_length, 1 + (b is not None)))
    ids = [*a, v.eos] + ([*b, v.eos] if b is not None else [])
    return {"input_ids": _i64(ids)}


def _xlnet(arch, loaded, a, b, max_length):
    v = loaded.vocab
    _require(loaded, arch, "sep", "cls")
    a, b = fit(a, b, _budget(arch, max_length, 2 + (b is not None)))
    ids = [*a, v.sep]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, v.sep]
        types += [1] * (len(b) + 1)
    return {"input_ids": _i64([*ids, v.cls]), "token_type_ids": _i64([*types, XLNET_CLS_SEGMENT])}


def _elmo(arch, loaded, a, b, max_length):
    """``a`` and ``b`` are word lists here."""
    v = loaded.vocab
    _require(loaded, arch, "bos", "eos", "unk")
    a, b = fit(a, b, _budget(arch, max_length, 2 + 2 * (b is not None)))
    width = loaded.max_characters
    words_of = loaded.tokenizer.get_vocab()
    ids, chars = [], []
    for words in (a, b):
        if words is None:
            continue
        ids += [v.bos, *(words_of.get(w, v.unk) for w in words), v.eos]
        chars += [marker(BOS_CHAR, width), *(encode_word(w, width) for w in words), marker(EOS_CHAR, width)]
    return {"input_ids": _i64(ids), "char_ids": np.stack(chars).astype(np.int64)}


_CLASSIFICATION_LAYOUTS = {"bert": _bert_like, "ernie": _bert_like, "albert": _bert_like, "gpt": _gpt,
                           "transformer_xl": _transformer_xl, "xlnet": _xlnet, "elmo": _elmo}


class _TextToText:
    """Inputs ``[<s>] prefix: a [sentence2: b] </s>`` (``<s>`` for BART only)."""

    def __init__(self, arch: str, loaded: LoadedTokenizer, prefix: str):
        _require(loaded, arch, "eos", "pad", *(("bos",) if arch == "bart" else ()))
        self.arch, self.loaded = arch, loaded
        self.start = [loaded.vocab.bos] if arch == "bart" else []
        self.prefix_ids = loaded.encode([f"{prefix}:"])[0]
        self.field_ids = loaded.encode([f" {PAIR_FIELD}:"])[0]

    def inputs(self, a: list[int], b: list[int] | None, max_length: int) -> dict[str, np.ndarray]:
        v = self.loaded.vocab
        used = len(self.start) + len(self.prefix_ids) + 1 + (len(self.field_ids) if b is not None else 0)
        a, b = fit(a, b, _budget(self.arch, max_length, used))
        ids = [*self.start, *self.prefix_ids, *a]
        if b is not None:
            ids += [*self.field_ids, *b]
        return {"input_ids": _i64([*ids, v.eos])}


def label_targets(arch: str, loaded: LoadedTokenizer, label_names: Sequence[str]) -> dict[str, list[int]]:
    v = loaded.vocab
    start = [v.bos] if arch == "bart" else []
    encoded = loaded.encode(list(label_names))
    targets = {name: [*start, *ids, v.eos] for name, ids in zip(label_names, encoded)}
    seen: dict[tuple[int, ...], str] = {}
    for name, ids in targets.items():
        if len(ids) == len(start) + 1:
            raise FeatureError(f"{arch}: label {name!r} encodes to no tokens")
        if tuple(ids) in seen:
            raise FeatureError(f"{arch}: labels {seen[tuple(ids)]!r} and {name!r} encode to the same target {ids} "
                               f"with the tokenizer in {loaded.directory}")
        seen[tuple(ids)] = name
    return targets


# ----------------------------------------------------------------------------- the API


def label_token_ids(task: Task, arch: str, tokenizer_dir: str | Path) -> dict[str, list[int]]:
    """Each label's target sequence for a text-to-text ``arch`` (``</s>``-terminated, ``<s>``
    first for BART): the ``labels`` ``encode_split`` gives, for scoring every label by its
    likelihood (rank classification) or checking a greedy generation against."""
    if not text_to_text(arch):
        raise FeatureError(f"{arch} is not a text-to-text architecture (those are {sorted(TEXT_TO_TEXT)})")
    loaded = load_tokenizer(arch, tokenizer_dir)
    _require(loaded, arch, "eos", *(("bos",) if arch == "bart" else ()))
    return label_targets(arch, loaded, task.label_names)


def encode_examples(examples: Sequence[Example], arch: str, tokenizer_dir: str | Path, max_length: int,
                    label_ids: dict[str, int], *, prefix: str = "", mode: str | None = None,
                    label_names: Sequence[str] | None = None) -> list[dict[str, np.ndarray]]:
    """``encode_split`` for a list of examples (``prefix``: the text-to-text task prefix)."""
    _check_arch(arch)
    mode = mode or default_mode(arch)
    if mode not in ("classification", "text_to_text", "regression"):
        raise FeatureError(f"mode must be 'classification', 'text_to_text' or 'regression', got {mode!r}")
    if mode == "text_to_text" and arch not in TEXT_TO_TEXT:
        raise FeatureError(f"{arch} has no text-to-text head; text-to-text is for {sorted(TEXT_TO_TEXT)}")
    if max_length < 2:
        raise FeatureError(f"max_length must be at least 2, got {max_length}")
    loaded = load_tokenizer(arch, tokenizer_dir)
    pair = [e.text_pair is not None for e in examples]
    texts = [e.text for e in examples]
    pairs = [e.text_pair for e in examples if e.text_pair is not None]

    if arch == "elmo":  # words as the char tokenizer splits them (its normaliser, if any, first)
        normalizer, split = loaded.tokenizer.normalizer, loaded.tokenizer.pre_tokenizer.pre_tokenize_str

        def tokens(batch):
            return [[w for w, _ in split(normalizer.normalize_str(t) if normalizer else t)] for t in batch]
    elif arch in TEXT_TO_TEXT:  # after "prefix:" / "sentence2:" a text starts after a space
        def tokens(batch):
            return loaded.encode([" " + t for t in batch])
    else:
        tokens = loaded.encode
    a_all = tokens(texts)
    b_iter = iter(tokens(pairs))
    t2t = _TextToText(arch, loaded, prefix or "task") if arch in TEXT_TO_TEXT else None
    targets = label_targets(arch, loaded, label_names or sorted(label_ids, key=label_ids.get)) \
        if mode == "text_to_text" else None
    out = []
    for e, a, has_pair in zip(examples, a_all, pair):
        b = next(b_iter) if has_pair else None
        if t2t is not None:
            features = t2t.inputs(list(a), None if b is None else list(b), max_length)
        else:
            features = _CLASSIFICATION_LAYOUTS[arch](arch, loaded, list(a), None if b is None else list(b), max_length)
        if mode == "regression":  # a float target for the one-output head (mean squared error)
            features["labels"] = np.asarray(float(e.label), dtype=np.float32)
        elif mode == "text_to_text":
            if e.label not in targets:
                raise FeatureError(f"example {e.id or e.text[:40]!r}: label {e.label!r} not in {list(targets)}")
            features["labels"] = _i64(targets[e.label])
        else:
            if e.label not in label_ids:
                raise FeatureError(f"example {e.id or e.text[:40]!r}: label {e.label!r} not in {sorted(label_ids)}")
            features["labels"] = np.asarray(label_ids[e.label], dtype=np.int64)  # 0-d: pad_batch stacks it
        out.append(features)
    return out


def encode_split(task: Task, split: str, arch: str, tokenizer_dir: str | Path, max_length: int,
                 label_ids: dict[str, int] | None = None, *, mode: str | None = None) -> list[dict[str, np.ndarray]]:
    """The examples of ``task.splits[split]`` as unpadded model inputs for ``arch`` (the layouts:
    docs/FINETUNING.md), in the split's order. ``tokenizer_dir``: the kind's
    directory (``data/tokenizers/<kind>``) or the tokenizers root. ``label_ids``: label name ->
    class index (default: the order of ``task.label_names``). ``mode``: ``classification`` or
    ``text_to_text`` (the default for t5, switch and bart)."""
    if split not in task.splits:
        raise FeatureError(f"task {task.name!r} has no split {split!r} (has {sorted(task.splits)})")
    label_ids = label_ids if label_ids is not None else {name: i for i, name in enumerate(task.label_names)}
    return encode_examples(task.splits[split], arch, tokenizer_dir, max_length, label_ids, prefix=task.prefix,
                           mode=mode, label_names=task.label_names)


def collate(examples: Sequence[dict[str, np.ndarray]], pad_id: int):
    """A batch of ``torch.Tensor`` (int64): ``pad_batch`` pads on the right (ids with
    ``pad_id``, seq2seq ``labels`` with -100, ``char_ids`` with the padding character), stacks
    the scalar class labels and adds ``attention_mask``."""
    return pad_batch(list(examples), pad_id)
