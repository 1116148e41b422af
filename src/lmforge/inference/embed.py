"""``lmforge embed``: contextual vectors from any trained model, per token, per word or per text.

Each text is read in its architecture's layout (``[CLS] text [SEP]`` for BERT, ERNIE and ALBERT;
``text <sep> <cls>`` for XLNet; ``</s>`` after the text for T5 and Switch, ``<s> text </s>`` for BART,
whose vectors are the encoder's; a document start before it for GPT's and Transformer-XL's
language models; ELMo's ``<S> words </S>``). The vectors are the last layer's states, except for
ELMo, whose layers are mixed: ``top`` (the last LSTM layer), ``uniform`` (their mean) or
``learned`` (the scalar mix a fine-tuned ELMo classifier learnt).

- ``token``: one vector per token of the layout, specials included.
- ``word``: the mean of each word's sub-token vectors (words as the tokenizer's pre-tokenizer
  splits them; ELMo's tokens are words).
- ``text``: ``mean`` over the real tokens (specials included, as the classifiers read them),
  ``cls`` (BERT-like: the first token; XLNet: its final ``<cls>``) or ``last`` (the last real token).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .export import special_template
from .loading import InferenceError, LoadedModel

LEVELS = ("token", "word", "text")
POOLINGS = ("mean", "cls", "last")
MIXES = ("top", "uniform", "learned")


@dataclass
class Embedded:
    """Per text: ``ids`` (its input ids), ``vectors`` (positions x D; one row for ``text``), and
    ``units`` (the token ids, words, or None for ``text``) naming each row."""

    ids: list[list[int]]
    vectors: list[np.ndarray]
    units: list[list] | None


def _layout(loaded: LoadedModel, text_ids: list[int]) -> tuple[list[int], int]:
    """(input ids, index of the first text token)."""
    template = special_template(loaded)
    if template is None:  # the causal language models: a document start
        return [loaded.vocab.eos, *text_ids], 1
    to_id = loaded.tokenizer.tokenizer.token_to_id
    before, after = [to_id(t) for t in template[0]], [to_id(t) for t in template[1]]
    return [*before, *text_ids, *after], len(before)


def _encode(loaded: LoadedModel, texts: Sequence[str], max_length: int) -> list[dict]:
    """Per text: input_ids (and char_ids for ELMo), the text's start, and each text token's word index."""
    if loaded.arch == "elmo":
        from ..finetuning.features import encode_examples
        from ..finetuning.tasks import Example

        rows = encode_examples([Example(t, None, "") for t in texts], "elmo", loaded.tokenizer.directory,
                               max_length, {"": 0}, mode="classification")
        return [{"input_ids": r["input_ids"].tolist(), "char_ids": r["char_ids"], "start": 1,
                 "words": list(range(len(r["input_ids"]) - 2))} for r in rows]
    out = []
    for encoding in loaded.tokenizer.tokenizer.encode_batch(list(texts), add_special_tokens=False):
        ids, start = _layout(loaded, encoding.ids)
        if len(ids) > max_length:
            raise InferenceError(f"a text of {len(ids)} tokens is longer than max_length {max_length}")
        loaded.check_length(ids)
        out.append({"input_ids": ids, "start": start, "words": list(encoding.word_ids)})
    return out


def _states(loaded: LoadedModel, batch: list[dict], mix: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L, D) float states and the (B, L) mask of real tokens."""
    model, arch = loaded.model, loaded.arch
    pad = loaded.vocab.pad if loaded.vocab.pad is not None else 0
    L = max(len(r["input_ids"]) for r in batch)
    ids = torch.full((len(batch), L), pad, dtype=torch.long)
    mask = torch.zeros(len(batch), L, dtype=torch.long)
    for i, r in enumerate(batch):
        ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[i, :len(r["input_ids"])] = 1
    if arch == "elmo":
        width = batch[0]["char_ids"].shape[1]
        chars = torch.zeros(len(batch), L, width, dtype=torch.long)
        for i, r in enumerate(batch):
            chars[i, :len(r["char_ids"])] = torch.from_numpy(r["char_ids"])
        states = model.encoder(model.char_cnn(chars), mask.bool())  # [embedding, LSTM 1, ...]
        if mix == "top":
            return states[-1].float(), mask
        if mix == "uniform":
            return torch.stack(states).mean(0).float(), mask
        if not hasattr(model, "mix"):
            raise InferenceError("the learned mix belongs to a fine-tuned ELMo classifier; this is the pretrained biLM "
                                 "(use --mix top or uniform)")
        return model.mix(states).float(), mask
    if mix != "top":
        raise InferenceError(f"--mix {mix} is for ELMo's layers; {arch} gives its last layer")
    if hasattr(model, "encode"):  # BART, T5, Switch: the encoder's states
        return model.encode(ids, mask).float(), mask
    return model(ids, attention_mask=mask).hidden_states.float(), mask


def embed(loaded: LoadedModel, texts: Sequence[str], level: str = "text", pooling: str = "mean", mix: str = "top",
          batch_size: int = 32, max_length: int = 512, progress: Callable[[int], None] | None = None) -> Embedded:
    """Vectors for ``texts`` (the module docstring); ``progress`` gets the texts done so far."""
    if level not in LEVELS:
        raise InferenceError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if pooling not in POOLINGS:
        raise InferenceError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if mix not in MIXES:
        raise InferenceError(f"mix must be one of {', '.join(MIXES)}, got {mix!r}")
    if pooling == "cls" and level == "text" and loaded.arch not in ("bert", "albert", "ernie", "xlnet"):
        raise InferenceError(f"{loaded.arch} has no [CLS] token; pool with mean or last")
    if not texts or any(not t.strip() for t in texts):
        raise InferenceError("empty text: every text needs at least one word")
    rows = _encode(loaded, texts, max_length)
    ids_out, vectors, units = [], [], []
    with torch.inference_mode():
        for b in range(0, len(rows), batch_size):
            batch = rows[b:b + batch_size]
            states, mask = _states(loaded, batch, mix)
            for r, h in zip(batch, states):
                n = len(r["input_ids"])
                h = h[:n]
                ids_out.append(r["input_ids"])
                if level == "token":
                    vectors.append(h.numpy())
                    units.append(r["input_ids"])
                elif level == "word":
                    words = r["words"]
                    count = max(w for w in words if w is not None) + 1 if any(w is not None for w in words) else 0
                    pooled = torch.zeros(count, h.size(-1))
                    sizes = torch.zeros(count)
                    for k, w in enumerate(words):
                        if w is not None:
                            pooled[w] += h[r["start"] + k]
                            sizes[w] += 1
                    vectors.append((pooled / sizes.clamp(min=1)[:, None]).numpy())
                    units.append(list(range(count)))
                else:
                    if pooling == "mean":
                        v = h.mean(0)
                    elif pooling == "cls":
                        v = h[n - 1] if loaded.arch == "xlnet" else h[0]
                    else:
                        v = h[n - 1]
                    vectors.append(v[None].numpy())
            if progress:
                progress(min(b + batch_size, len(rows)))
    return Embedded(ids_out, vectors, units if level != "text" else None)


def write(embedded: Embedded, texts: Sequence[str], path, level: str) -> None:
    """``.npy``: the (N, D) text vectors (``text`` level only); ``.parquet``: one row per vector
    with the text's index, the input ids and the row's position (token or word)."""
    import io
    from pathlib import Path

    from ..artifacts import atomic_write_bytes

    path = Path(path)
    if path.suffix == ".npy":
        if level != "text":
            raise InferenceError("a .npy file holds one vector per text; write token or word vectors to .parquet")
        buffer = io.BytesIO()
        np.save(buffer, np.concatenate(embedded.vectors))
        atomic_write_bytes(path, buffer.getvalue())  # whole or not at all
        return
    if path.suffix != ".parquet":
        raise InferenceError(f"{path}: write .npy or .parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = {"text_index": [], "position": [], "input_ids": [], "vector": []}
    for i, (ids, v) in enumerate(zip(embedded.ids, embedded.vectors)):
        for p, row in enumerate(v):
            records["text_index"].append(i)
            records["position"].append(p)
            records["input_ids"].append(ids)
            records["vector"].append(row.tolist())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(records), sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
