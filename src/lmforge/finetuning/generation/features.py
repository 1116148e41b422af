"""Generation inputs: a source and its reference target for the models that write text.

- BART, T5 and Switch (sequence to sequence): the encoder reads the text-to-text layout
  ``prefix: source </s>`` (``<s>`` first for BART, ``features.py``) and the decoder is trained
  on ``target </s>`` (BART: ``<s> target </s>``, its pretraining decoder layout), the model
  shifting the labels right into its decoder inputs.
- GPT (conditional generation, as GPT-2 was prompted for summaries): one sequence
  ``<s> source <delim> target </s>``, the language-model loss on the target's tokens and ``</s>``
  only (the source's positions are -100); generation continues the prompt ``<s> source <delim>``.

The source is cut to leave the target its room (``max_target`` tokens, cut first) in
``max_length``; ``prompts`` gives the generation inputs alone, without the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...objectives.base import IGNORE_INDEX
from ..features import FeatureError, _check_arch, _TextToText, gpt_delimiter, load_tokenizer
from ..tasks import TextPair

SEQ2SEQ = ("bart", "t5", "switch")
WRITERS = (*SEQ2SEQ, "gpt")


def fits_family(arch: str, family: str) -> bool:
    """Whether ``arch`` fine-tunes on a task of ``family``: every architecture but on generation,
    which only the writers take."""
    return family != "generation" or arch in WRITERS


def check_writer(arch: str) -> None:
    _check_arch(arch)
    if arch not in WRITERS:
        raise FeatureError(f"{arch} does not generate text for a generation task; the architectures that do: "
                           f"{', '.join(WRITERS)}")


def encode_pairs(pairs: Sequence[TextPair], arch: str, tokenizer_dir: str | Path, max_length: int, *, prefix: str = "",
                 max_target: int = 64, with_target: bool = True) -> list[dict[str, np.ndarray]]:
    """Each pair as unpadded training inputs with ``labels`` (``with_target=False``: the
    generation inputs alone, the prompt for GPT)."""
    check_writer(arch)
    loaded = load_tokenizer(arch, tokenizer_dir)
    v = loaded.vocab
    lead = arch in SEQ2SEQ  # after "prefix:" a text starts after a space
    sources = loaded.encode([(" " if lead else "") + p.source for p in pairs])
    targets = loaded.encode([" " + p.target.strip() for p in pairs])  # a target reads as text after a space
    out = []
    if arch in SEQ2SEQ:
        t2t = _TextToText(arch, loaded, prefix or "summarize")
        start = [v.bos] if arch == "bart" else []
        for src, tgt in zip(sources, targets):
            f = t2t.inputs(list(src), None, max_length)
            if with_target:
                f["labels"] = np.asarray([*start, *tgt[:max_target], v.eos], dtype=np.int64)
            out.append(f)
        return out
    if v.bos is None or v.eos is None:
        raise FeatureError(f"gpt: the tokenizer in {loaded.directory} has no bos or eos token")
    delimiter = gpt_delimiter(v)
    for src, tgt in zip(sources, targets):
        tgt = list(tgt[:max_target]) + [v.eos] if with_target else []
        room = max_length - 2 - len(tgt)  # <s> ... <delim>
        if room < 1:
            raise FeatureError(f"gpt: max_length {max_length} leaves no room for the source after a target of "
                               f"{len(tgt)} tokens; raise finetune.max_length")
        prompt = [v.bos, *src[:room], delimiter]
        f = {"input_ids": np.asarray(prompt + tgt, dtype=np.int64)}
        if with_target:
            f["labels"] = np.asarray([IGNORE_INDEX] * len(prompt) + tgt, dtype=np.int64)
        out.append(f)
    return out


def decode(arch: str, tokenizer_dir: str | Path, ids: Sequence[int]) -> str:
    """Generated ids as text: up to the first ``</s>``, special tokens dropped."""
    loaded = load_tokenizer(arch, tokenizer_dir)
    v = loaded.vocab
    specials = {i for i in (v.bos, v.pad, v.cls, v.sep) if i is not None}
    kept = []
    for i in ids:
        if i == v.eos:
            break
        if i not in specials:
            kept.append(int(i))
    return loaded.tokenizer.decode(kept, skip_special_tokens=True).strip()
