"""Intrinsic evaluation of a pretrained model on its objective's validation split.

For every objective the model predicts some token ids (``labels`` != -100); we measure, over all
those predictions of the validation split (epoch 0's masks, so every run sees the same ones):

- ``loss``: mean cross entropy in nats per predicted token, and ``perplexity`` = exp(loss);
- ``accuracy``: the share of predictions whose argmax is right (MLM / span / next-token accuracy);
- ``bits_per_byte``: loss / ln 2 / (mean UTF-8 bytes per token of the tokenizer on the validation
  text). For objectives that predict every token (clm, segments, bilm) this is comparable across
  tokenizers and architectures; for the masked / span objectives it is the cost of the predicted
  tokens only, per byte of their text;
- ``unigram_loss``: the same cross entropy for the best context-free predictor, a unigram
  distribution over the objective's own *training* targets (add-one smoothing over the vocabulary),
  the trivial baseline a model must beat to show it uses context;
- ``uniform_loss`` = ln(vocabulary size), where an untrained model starts.

Which logits score which labels is declared per objective, not guessed: GPT's causal LM shifts
inside the model (position t predicts t + 1), ELMo scores two directions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..objectives.base import IGNORE_INDEX

# objective -> [(logits source, labels key, shift)]: "logits" is out.logits, "aux.X" is out.aux["X"]
SCORED: dict[str, list[tuple[str, str, bool]]] = {
    "clm": [("logits", "labels", True)],
    "bilm": [("logits", "labels", False), ("aux.backward_logits", "backward_labels", False)],
}
DEFAULT_SCORED = [("logits", "labels", False)]


def scored_pairs(objective: str) -> list[tuple[str, str, bool]]:
    return SCORED.get(objective, DEFAULT_SCORED)


def _aligned(out, batch: dict[str, torch.Tensor], source: str, key: str, shift: bool):
    logits = out.logits if source == "logits" else out.aux[source.split(".", 1)[1]]
    labels = batch[key]
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    return logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1)


def target_counts(batches: Iterable[dict[str, torch.Tensor]], objective: str, vocab_size: int) -> np.ndarray:
    """Counts of each target id over the labels of ``batches`` (for the unigram baseline)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for batch in batches:
        for _, key, shift in scored_pairs(objective):
            labels = batch[key][:, 1:] if shift else batch[key]
            labels = labels[labels != IGNORE_INDEX]
            counts += np.bincount(labels.numpy().ravel(), minlength=vocab_size)[:vocab_size]
    return counts


@torch.no_grad()
def evaluate_lm(model: torch.nn.Module, batches: Iterable[dict[str, torch.Tensor]], objective: str, *,
                vocab_size: int, unigram_counts: np.ndarray | None = None, bytes_per_token: float | None = None,
                carry_memory: bool = False, device: torch.device | str = "cpu",
                precision: str | None = None) -> dict[str, float]:
    """The numbers of the module docstring over ``batches`` (model in eval mode, memories carried
    from batch to batch when ``carry_memory``). ``precision`` is the one the model trains at
    (Lightning's names): at ``bf16-mixed`` the forward pass runs under bf16 autocast as training
    did (in float32 a base model's pass on a GPU took several times as long); the losses are
    summed in float32 either way."""
    was_training = model.training
    model.eval()
    log_unigram = None
    if unigram_counts is not None:
        smoothed = unigram_counts.astype(np.float64) + 1.0
        log_unigram = torch.from_numpy(np.log(smoothed / smoothed.sum()))
    nll = correct = count = 0.0
    unigram_nll = 0.0
    mems = None
    device_type = torch.device(device).type
    autocast = torch.autocast(device_type, dtype=torch.bfloat16, enabled=(precision or "").startswith("bf16"))
    try:
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            inputs = dict(batch)
            if carry_memory and mems is not None and mems[0].shape[0] == batch["input_ids"].shape[0]:
                inputs["mems"] = mems
            with autocast:
                out = model(**inputs)
            mems = out.aux.get("mems") if carry_memory else None
            for source, key, shift in scored_pairs(objective):
                logits, labels = _aligned(out, batch, source, key, shift)
                keep = labels != IGNORE_INDEX
                if not keep.any():
                    continue
                logits, labels = logits[keep], labels[keep]
                nll += F.cross_entropy(logits, labels, reduction="sum").item()
                correct += (logits.argmax(-1) == labels).sum().item()
                count += labels.numel()
                if log_unigram is not None:
                    unigram_nll -= log_unigram[labels.cpu()].sum().item()
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError(f"{objective}: the validation batches contain no predicted tokens")
    loss = nll / count
    result = {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)),
        "accuracy": correct / count,
        "predicted_tokens": int(count),
        "uniform_loss": math.log(vocab_size),
    }
    if bytes_per_token:
        result["bits_per_byte"] = loss / math.log(2) / bytes_per_token
    if log_unigram is not None:
        result["unigram_loss"] = unigram_nll / count
        if bytes_per_token:
            result["unigram_bits_per_byte"] = result["unigram_loss"] / math.log(2) / bytes_per_token
    return result


def tokenizer_bytes_per_token(tokenizer_dir: str | Path) -> float | None:
    """Mean UTF-8 bytes per token on the validation split (the tokenizer stage's metrics.json)."""
    path = Path(tokenizer_dir) / "metrics.json"
    if not path.exists():
        return None
    return float(json.loads(path.read_text(encoding="utf-8"))["bytes_per_token"])
