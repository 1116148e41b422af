"""Contextual data augmentation (Kobayashi 2018, "Contextual Augmentation"; the study notes'
"BERT in practice"): new training examples made by replacing words of the old ones with what a
trained masked language model predicts in their place.

For each copy and each example, ``rate`` of its words (at least one) are drawn, each replaced by
one mask token, and the masked LM (BERT, ALBERT or ERNIE, pretrained by lmforge) draws a
replacement from its distribution at that position, among the tokens that start a word (not
specials, not a WordPiece ``##`` continuation). The label is kept: the replacement is
label-preserving by assumption, as in the paper's unconditional variant. Words beyond the masked
LM's input length keep their original text. Deterministic for a seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .loading import InferenceError, LoadedModel

MASKED_LMS = ("bert", "albert", "ernie")


def _word_starts(loaded: LoadedModel) -> tuple[torch.Tensor, list[str]]:
    """(V,) bool: the tokens a replacement may be; and each token's text as a word."""
    tok = loaded.tokenizer.tokenizer
    size = loaded.vocab.size
    texts, allowed = [], torch.zeros(size, dtype=torch.bool)
    kind = loaded.tokenizer.kind
    for i in range(size):
        piece = tok.id_to_token(i) or ""
        if kind == "wordpiece":
            start, word = not piece.startswith("##"), piece
        else:  # unigram with Metaspace: a word starts with "▁"
            start, word = piece.startswith("\u2581") and len(piece) > 1, piece[1:]
        allowed[i] = start and i not in loaded.vocab.special_ids and bool(word.strip())
        texts.append(word)
    return allowed, texts


def augment(examples: Sequence, loaded: LoadedModel, copies: int = 1, rate: float = 0.15, seed: int = 0,
            batch_size: int = 32) -> list:
    """``copies`` new examples per example (``finetuning.tasks.Example``), in order: copy 0 of every
    example, then copy 1, ..."""
    from ..finetuning.tasks import Example

    if loaded.arch not in MASKED_LMS or loaded.head == "classification":
        raise InferenceError(f"augmentation needs a pretrained masked LM ({', '.join(MASKED_LMS)}), not {loaded.arch} "
                             f"with its {loaded.head} head")
    if copies < 1 or not 0 < rate <= 1:
        raise InferenceError(f"augmentation: copies must be >= 1 and rate in (0, 1], got {copies} and {rate}")
    v = loaded.vocab
    mask_text = loaded.tokenizer.tokenizer.id_to_token(v.mask)
    allowed, token_text = _word_starts(loaded)
    limit = getattr(loaded.model.config, "max_positions", 512)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    jobs = []  # (example, words, chosen positions)
    for _ in range(copies):
        for e in examples:
            words = e.text.split()
            k = min(len(words), max(1, round(rate * len(words))))
            jobs.append((e, words, sorted(rng.choice(len(words), size=k, replace=False).tolist()) if words else []))
    out = []
    with torch.inference_mode():
        for b in range(0, len(jobs), batch_size):
            batch = jobs[b:b + batch_size]
            rows = []
            for _, words, chosen in batch:
                masked = " ".join(mask_text if i in set(chosen) else w for i, w in enumerate(words))
                rows.append([v.cls, *loaded.tokenizer.encode([masked])[0][:limit - 2], v.sep])
            L = max(len(r) for r in rows)
            ids = torch.full((len(rows), L), v.pad, dtype=torch.long)
            for i, r in enumerate(rows):
                ids[i, :len(r)] = torch.tensor(r)
            mask = (ids != v.pad).long()
            logits = loaded.model(ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).logits.float()
            logits = logits.masked_fill(~allowed[:logits.size(-1)], float("-inf"))
            for i, (e, words, chosen) in enumerate(batch):
                positions = (ids[i] == v.mask).nonzero().flatten().tolist()
                new = list(words)
                for word_index, p in zip(chosen, positions):  # masks past the input length keep their word
                    pick = int(torch.multinomial(logits[i, p].softmax(-1), 1, generator=generator))
                    new[word_index] = token_text[pick]
                out.append(Example(" ".join(new), e.text_pair, e.label, f"{e.id}#augmented" if e.id else None))
    return out
