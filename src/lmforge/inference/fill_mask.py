"""``lmforge fill-mask``: what the pretrained models put in a blank.

- BERT, ALBERT and ERNIE: the top-k tokens at every mask with their probabilities (a softmax
  over the vocabulary at that position, as transformers' fill-mask pipeline), and the text with
  each mask filled by its most likely token. The input is ``[CLS] text [SEP]``, as in pretraining.
- T5 and Switch: blanks are sentinels (``<extra_id_0>``, ``<extra_id_1>``, ...), the span
  corruption objective's; the model writes ``<extra_id_0> span <extra_id_1> span ...`` and each
  blank gets its span.
- BART: the text with ``<mask>`` spans is rewritten whole, as the denoising objective trained it to.

A blank may be typed as the model's own mask token or as ``[MASK]`` / ``<mask>`` for any of
them (for T5 and Switch each one becomes the next sentinel).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from .generate import Settings, generate_ids
from .loading import InferenceError, LoadedModel

MASKED = ("bert", "albert", "ernie")
SENTINEL = ("t5", "switch")
FILLERS = (*MASKED, *SENTINEL, "bart")
GENERIC_MASKS = re.compile(r"\[MASK\]|<mask>")


@dataclass
class Filled:
    sequence: str  # the text with every blank filled by the best candidate
    blanks: list[list[dict]] = field(default_factory=list)  # per blank: {token, token_str, score} best first


def _token_text(loaded: LoadedModel, role: str) -> str:
    token_id = getattr(loaded.vocab, role)
    return loaded.tokenizer.tokenizer.id_to_token(token_id)


def _masked_lm(loaded: LoadedModel, text: str, top_k: int) -> Filled:
    v = loaded.vocab
    mask_text = _token_text(loaded, "mask")
    text = GENERIC_MASKS.sub(mask_text, text)
    ids = [v.cls, *loaded.tokenizer.encode([text])[0], v.sep]
    loaded.check_length(ids)
    positions = [i for i, t in enumerate(ids) if t == v.mask]
    if not positions:
        raise InferenceError(f"no mask in the text: mark each blank with {mask_text} (or [MASK])")
    x = torch.tensor([ids])
    with torch.inference_mode():
        logits = loaded.model(x, attention_mask=torch.ones_like(x), token_type_ids=torch.zeros_like(x)).logits[0]
    blanks, best = [], list(ids)
    for p in positions:
        probs = logits[p].float().softmax(-1)
        scores, tokens = probs.topk(min(top_k, probs.numel()))
        blanks.append([{"token": int(t), "token_str": loaded.decode([int(t)]), "score": float(s)}
                       for s, t in zip(scores, tokens)])
        best[p] = int(tokens[0])
    return Filled(loaded.decode(best[1:-1]), blanks)


def _sentinels(loaded: LoadedModel, text: str, settings: Settings) -> Filled:
    sentinels = loaded.vocab.sentinels
    count = iter(range(len(sentinels)))

    def next_sentinel(_):
        n = next(count, None)
        if n is None:
            raise InferenceError(f"more blanks than the tokenizer's {len(sentinels)} sentinels")
        return f"<extra_id_{n}>"

    text = GENERIC_MASKS.sub(next_sentinel, text)
    ids = [*loaded.tokenizer.encode([text])[0], loaded.vocab.eos]
    used = [t for t in ids if t in sentinels]
    if not used:
        raise InferenceError("no blank in the text: mark each with <extra_id_0>, <extra_id_1>, ... (or <mask>)")
    out = generate_ids(loaded, ids, settings)
    spans: dict[int, list[int]] = {}
    current = None
    for t in out:
        if t == loaded.vocab.eos:
            break
        if t in sentinels:
            current = t
            spans.setdefault(t, [])
        elif current is not None:
            spans[current].append(t)
    blanks, filled = [], []
    for t in ids[:-1]:
        if t in sentinels:
            span = spans.get(t, [])
            blanks.append([{"token": span, "token_str": loaded.decode(span).strip(), "score": None}])
            filled.extend(span)
        else:
            filled.append(t)
    return Filled(loaded.decode(filled), blanks)


def _bart(loaded: LoadedModel, text: str, settings: Settings) -> Filled:
    mask_text = _token_text(loaded, "mask")
    text = GENERIC_MASKS.sub(mask_text, text)
    ids = [loaded.vocab.bos, *loaded.tokenizer.encode([text])[0], loaded.vocab.eos]
    loaded.check_length(ids)
    if loaded.vocab.mask not in ids:
        raise InferenceError(f"no mask in the text: mark each blank with {mask_text}")
    return Filled(loaded.decode(generate_ids(loaded, ids, settings)))


def fill_mask(loaded: LoadedModel, text: str, top_k: int = 5, settings: Settings | None = None) -> Filled:
    """Fill the blanks of ``text`` (the module docstring); ``settings`` for the generating models
    (default: greedy, up to 2 tokens per input token plus 10)."""
    if loaded.arch not in FILLERS:
        raise InferenceError(f"{loaded.arch} does not fill blanks; the models that do: {', '.join(FILLERS)}")
    if loaded.head == "classification":
        raise InferenceError(f"{loaded.directory}: a fine-tuned classifier does not fill blanks; use its pretrained model")
    if not text.strip():
        raise InferenceError("the text is empty")
    if top_k < 1:
        raise InferenceError(f"top_k must be at least 1, got {top_k}")
    if loaded.arch in MASKED:
        return _masked_lm(loaded, text, top_k)
    settings = settings or Settings(max_new_tokens=10 + 2 * len(loaded.tokenizer.encode([text])[0]))
    return _sentinels(loaded, text, settings) if loaded.arch in SENTINEL else _bart(loaded, text, settings)
