"""Train each tokenizer kind with Hugging Face ``tokenizers`` and wrap it for ``transformers``.

The builders of each kind (byte-level BPE, WordPiece, Unigram, ELMo's word vocabulary), training
(``train_kind``, reproducible run to run), the ``transformers`` wrapper with the roles set
(``hf_tokenizer``) and the metrics on held-out texts (``measure``). The stage that trains the
configured kinds on the clean corpus and saves them is ``tokenizer_stage.py``.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ..artifacts import sha256_file
from ..config import ConfigError, TokenizerConfig
from ..progress import bar_on_terminal
from ..tokenizer_kinds import KIND_INFO, architectures_for

# transformers' names for the roles; roles without one (eod, eop) and the sentinels are extra.
_HF_ROLE = {"bos": "bos_token", "eos": "eos_token", "unk": "unk_token", "pad": "pad_token",
            "cls": "cls_token", "sep": "sep_token", "mask": "mask_token"}
_SCORE_DECIMALS = 5


def _specials(cfg) -> list[str]:
    return list(cfg.special_tokens.values())


def build_bpe(cfg) -> tuple[Tokenizer, Any]:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, special_tokens=_specials(cfg),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=bar_on_terminal(),
    )
    return tok, trainer


def build_wordpiece(cfg) -> tuple[Tokenizer, Any]:
    sp = cfg.special_tokens
    tok = Tokenizer(models.WordPiece(unk_token=sp["unk"]))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=cfg.strip_accents, lowercase=cfg.lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(
        vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, special_tokens=_specials(cfg),
        continuing_subword_prefix="##", show_progress=bar_on_terminal(),
    )
    return tok, trainer


def build_unigram(cfg) -> tuple[Tokenizer, Any]:
    tok = Tokenizer(models.Unigram())
    # Whitespace runs (newlines included) become one space, as SentencePiece's normaliser does:
    # Metaspace splits words on spaces only, so a newline would otherwise glue two words.
    steps = [normalizers.NFKC()] if cfg.normalization == "nfkc" else []
    steps.append(normalizers.Replace(Regex(r"\s+"), " "))
    if cfg.lowercase:
        steps.append(normalizers.Lowercase())
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=cfg.vocab_size - cfg.sentinels, special_tokens=_specials(cfg),
        unk_token=cfg.special_tokens["unk"], show_progress=bar_on_terminal(),
    )
    return tok, trainer


def build_char(cfg) -> tuple[Tokenizer, Any]:
    tok = Tokenizer(models.WordLevel(unk_token=cfg.special_tokens["unk"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(
        vocab_size=cfg.word_vocab_size, min_frequency=cfg.min_frequency, special_tokens=_specials(cfg), show_progress=bar_on_terminal()
    )
    return tok, trainer


BUILDERS: dict[str, Callable[[Any], tuple[Tokenizer, Any]]] = {
    "bpe": build_bpe, "wordpiece": build_wordpiece, "unigram": build_unigram, "char": build_char,
}


def _kind_cfg(cfg: TokenizerConfig, kind: str):
    return getattr(cfg, kind)


def _canonical_unigram(tok: Tokenizer, n_specials: int) -> Tokenizer:
    """Make Unigram training reproducible. Two things vary between runs of the trainer on the
    same corpus: scores differ in the last bits of a double (its sums run over hash maps), and
    the characters it appends so that every character stays encodable are given scores a step
    of 1e-4 apart in hash-set order. So: runs of single characters whose scores lie within
    2e-4 of each other get their scores reassigned in code-point order, scores are rounded to
    5 decimals (far below any difference that changes a segmentation), and pieces are sorted by
    (score, piece) after the specials."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    head, pieces = vocab[:n_specials], [list(p) for p in vocab[n_specials:]]
    i = 0
    while i < len(pieces):
        j = i + 1
        while j < len(pieces) and len(pieces[i][0]) == 1 and len(pieces[j][0]) == 1 and abs(pieces[j - 1][1] - pieces[j][1]) <= 2e-4:
            j += 1
        if j - i > 1:
            chars = sorted(p for p, _ in pieces[i:j])
            scores = sorted((s for _, s in pieces[i:j]), reverse=True)
            pieces[i:j] = [[c, s] for c, s in zip(chars, scores)]
        i = j
    rest = sorted(([p, round(s, _SCORE_DECIMALS)] for p, s in pieces), key=lambda ps: (-ps[1], ps[0]))
    data["model"]["vocab"] = head + rest
    return Tokenizer.from_str(json.dumps(data))


# ----------------------------------------------------------------------------- deterministic WordPiece
# The WordPiece trainer (a BPE trainer that prefixes word-internal symbols with "##") numbers the
# "##x" symbols in hash-map order, and those numbers break ties between equally frequent merges,
# so two runs on the same corpus can give different vocabularies (tokenizers issue #1794). The
# plain BPE trainer numbers its alphabet in code-point order. So we train plain BPE on words whose
# word-internal characters are moved to a private-use plane (a distinct symbol per character, as
# "##x" is) and map the learned vocabulary back: the same algorithm, with deterministic ties.
_CONT = 0xF0000  # Supplementary Private Use Area-A; word-internal BMP characters go here
_CONT_ASTRAL = 0x100000 - 0x10000  # Area-B; word-internal plane-1 characters (emoji) go here


def _mark_internal(word: str) -> str | None:
    out = [word[0]]
    for ch in word[1:]:
        o = ord(ch)
        if o < 0xFFFE:
            out.append(chr(_CONT + o))
        elif 0x10000 <= o < 0x1FFFE:
            out.append(chr(_CONT_ASTRAL + o))
        else:
            return None  # rarer planes: no room in the private-use areas; the word is left out
    return "".join(out)


def _unmark(token: str) -> str:
    chars = []
    for ch in token:
        o = ord(ch)
        chars.append(chr(o - _CONT_ASTRAL) if o >= 0x100000 else chr(o - _CONT) if o >= _CONT else ch)
    return "".join(chars)


def _private(word: str) -> bool:
    return any(ord(ch) >= _CONT or 0xE000 <= ord(ch) <= 0xF8FF for ch in word)


def _train_wordpiece(texts: Callable[[], Iterator[str]], kcfg) -> Tokenizer:
    tok, _ = build_wordpiece(kcfg)

    def marked() -> Iterator[str]:
        for text in texts():
            words = tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))
            kept = [_mark_internal(w) for w, _ in words if not _private(w)]
            yield " ".join(w for w in kept if w)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bpe.train_from_iterator(marked(), trainers.BpeTrainer(
        vocab_size=kcfg.vocab_size, min_frequency=kcfg.min_frequency, special_tokens=_specials(kcfg), show_progress=bar_on_terminal(),
    ))
    specials = set(_specials(kcfg))
    vocab: dict[str, int] = {}
    for token, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1]):
        if token in specials:
            vocab[token] = len(vocab)
        elif ord(token[0]) >= _CONT:
            vocab["##" + _unmark(token)] = len(vocab)
        else:
            vocab[_unmark(token)] = len(vocab)
    tok.model = models.WordPiece(vocab=vocab, unk_token=kcfg.special_tokens["unk"], continuing_subword_prefix="##")
    return tok


def train_kind(kind: str, texts: Callable[[], Iterator[str]], cfg: TokenizerConfig) -> Tokenizer:
    """Train one kind on the texts (a callable returning a fresh iterator, in a stable order)."""
    kcfg = _kind_cfg(cfg, kind)
    if kind == "wordpiece":
        tok = _train_wordpiece(texts, kcfg)
    else:
        tok, trainer = BUILDERS[kind](kcfg)
        try:
            tok.train_from_iterator(texts(), trainer)
        except Exception as exc:  # tokenizers raises a bare Exception for a vocabulary too small for the corpus
            if "not large enough" not in str(exc):
                raise
            room = kcfg.vocab_size - getattr(kcfg, "sentinels", 0)
            raise ConfigError(f"tokenizer.{kind}: {room} ids (vocab_size {kcfg.vocab_size}"
                              + (f" less {kcfg.sentinels} sentinels" if kind == "unigram" else "")
                              + f") are too few for the corpus's characters ({str(exc).lower()}); raise vocab_size"
                              + (" or lower sentinels" if kind == "unigram" else "")) from None
    if kind == "unigram":
        tok = _canonical_unigram(tok, len(kcfg.special_tokens))
        # T5 sentinels at the top ids, counting down: <extra_id_0> is the last id.
        tok.add_special_tokens([f"<extra_id_{i}>" for i in reversed(range(kcfg.sentinels))])
    if kind == "wordpiece":
        sp = kcfg.special_tokens
        cls, sep = sp["cls"], sp["sep"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
        )
    return tok


def hf_tokenizer(tok: Tokenizer, kind: str, cfg: TokenizerConfig):
    """Wrap as ``transformers.PreTrainedTokenizerFast`` with the roles set."""
    from transformers import PreTrainedTokenizerFast

    kcfg = _kind_cfg(cfg, kind)
    kwargs = {_HF_ROLE[r]: t for r, t in kcfg.special_tokens.items() if r in _HF_ROLE}
    extra = [t for r, t in kcfg.special_tokens.items() if r not in _HF_ROLE]
    if kind == "unigram":
        extra += [f"<extra_id_{i}>" for i in range(kcfg.sentinels)]
    if extra:
        kwargs["additional_special_tokens"] = extra
    return PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)


# ----------------------------------------------------------------------------- metrics

FERTILITY_SAMPLE = 2000  # documents (the first of the held-out texts) the fertility histogram counts
FERTILITY_MAX = 8  # tokens per word counted one by one up to this; the last bin holds more too
TOKEN_LENGTH_MAX = 16  # vocabulary entries' lengths likewise
_WORD = re.compile(r"\S+")


def fertility_histogram(texts: list[str], encodings) -> dict[str, Any]:
    """Whitespace-separated words by the number of tokens they are split into (index k: k
    tokens; the last index: ``FERTILITY_MAX`` or more), over the first ``FERTILITY_SAMPLE``
    texts. A token belongs to the word holding its last character (a byte-level token " the"
    carries the space before its word); tokens of whitespace alone belong to no word."""
    counts = [0] * (FERTILITY_MAX + 1)
    documents = 0
    for text, enc in zip(texts[:FERTILITY_SAMPLE], encodings):
        documents += 1
        spans = [m.span() for m in _WORD.finditer(text)]
        starts = [a for a, _ in spans]
        per_word = [0] * len(spans)
        for a, b in enc.offsets:
            if b <= a:
                continue
            i = bisect.bisect_right(starts, b - 1) - 1
            if i >= 0 and b - 1 < spans[i][1]:
                per_word[i] += 1
        for n in per_word:
            counts[min(n, FERTILITY_MAX)] += 1
    return {"documents": documents, "words": sum(counts), "counts": counts}


def token_length_histogram(tok: Tokenizer, kind: str, specials: list[str]) -> dict[str, Any]:
    """The vocabulary's entries by length (index k: k long; the last index: ``TOKEN_LENGTH_MAX``
    or longer), special tokens left out, without the marks that are not text: byte-level BPE's
    leading-space "Ġ" (its lengths are bytes), Unigram's "▁", WordPiece's "##"."""
    added = set(tok.get_added_tokens_decoder())  # the sentinels too; a trained WordPiece has its specials in the vocabulary
    counts = [0] * (TOKEN_LENGTH_MAX + 1)
    for token, i in tok.get_vocab(with_added_tokens=False).items():
        if i in added or token in specials:
            continue
        if kind == "bpe":
            token = token.removeprefix("\u0120")
        elif kind == "unigram":
            token = token.removeprefix("\u2581")
        elif kind == "wordpiece":
            token = token.removeprefix("##")
        counts[min(len(token), TOKEN_LENGTH_MAX)] += 1
    return {"unit": "bytes" if kind == "bpe" else "characters", "counts": counts}


def measure(tok: Tokenizer, kind: str, texts: list[str], cfg: TokenizerConfig) -> dict[str, Any]:
    """Metrics on held-out texts: fertility, bytes per token, unknown rate, round trip."""
    kcfg = _kind_cfg(cfg, kind)
    unk = tok.token_to_id(kcfg.special_tokens["unk"]) if "unk" in kcfg.special_tokens else None
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    n_tokens = sum(len(e.ids) for e in encodings)
    n_words = sum(len(t.split()) for t in texts)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    n_unk = sum(e.ids.count(unk) for e in encodings) if unk is not None else 0
    decoded = tok.decode_batch([e.ids for e in encodings], skip_special_tokens=False)
    same = sum(d == t for d, t in zip(decoded, texts))
    return {
        "kind": kind,
        "architectures": architectures_for(kind),
        "vocab_size": tok.get_vocab_size(),
        "vocab_size_requested": kcfg.word_vocab_size if kind == "char" else kcfg.vocab_size,
        "documents": len(texts),
        "tokens": n_tokens,
        "tokens_per_word": round(n_tokens / max(1, n_words), 4),
        "bytes_per_token": round(n_bytes / max(1, n_tokens), 4),
        "unknown_rate": round(n_unk / max(1, n_tokens), 6),
        "round_trip_rate": round(same / max(1, len(texts)), 6),
        "round_trip_promised": KIND_INFO[kind].round_trip,
        "fertility": fertility_histogram(texts, encodings),
        "vocab_token_lengths": token_length_histogram(tok, kind, _specials(kcfg)),
    }


# ----------------------------------------------------------------------------- a saved tokenizer's identity


def tokenizer_sha256(directory: Path) -> str:
    """The checksum a saved tokenizer is known by: its metrics.json and the manifest of every token
    store encoded with it record it."""
    return sha256_file(directory / "tokenizer.json")
