"""Fine-tuning on a generation task: the model's written outputs scored against the references.

Greedy search for the validation passes, beam search (``TEST_BEAMS`` beams) for the final test
score. BART, T5 and Switch decode from their decoder start with ``models.generation.generate``;
GPT continues each prompt one example at a time, its window the last ``n_positions`` tokens
(beam search through ``models.generation.PromptAsMemory``, the prompt as the "encoder output").
Outputs end at ``</s>`` or after ``MAX_NEW_TOKENS``. The scores are ``metrics.py``'s for the
task's kind (ROUGE for summaries, BLEU and chrF for translation, exact match always).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .baselines import KIND_METRICS
from .features import SEQ2SEQ, decode
from .metrics import generation_scores
from ..tasks import TextPair
from ...models.generation import PromptAsMemory, beam_search, generate
from ..eval_batches import evaluating

MAX_NEW_TOKENS = 48
TEST_BEAMS = 4


@torch.no_grad()
def write(model: torch.nn.Module, arch: str, prompts: list[dict[str, np.ndarray]], collate: Callable,
          tokenizer_dir: str | Path, *, num_beams: int = 1, device="cpu", batch_size: int = 32) -> list[str]:
    """The text the model writes for every prompt (``encode_pairs(..., with_target=False)``)."""
    out: list[str] = []
    with evaluating(model):
        if arch in SEQ2SEQ:
            c = model.config
            for i in range(0, len(prompts), batch_size):
                batch = {k: v.to(device) for k, v in collate(prompts[i:i + batch_size]).items()}
                ids = generate(model, batch["input_ids"], batch["attention_mask"], MAX_NEW_TOKENS, num_beams,
                               decoder_start_token_id=c.decoder_start_id, eos_token_id=c.eos_id, pad_token_id=c.pad_id,
                               forced_bos_token_id=c.bos_id if arch == "bart" else None)
                out += [decode(arch, tokenizer_dir, row[1:].tolist()) for row in ids.cpu()]
            return out
        window = model.config.n_positions
        eos = decode_eos(arch, tokenizer_dir)
        for p in prompts:
            ids = torch.as_tensor(p["input_ids"], device=device)[None]
            if num_beams > 1:
                out.append(decode(arch, tokenizer_dir, _gpt_beam(model, ids, num_beams, eos)))
                continue
            written: list[int] = []
            for _ in range(MAX_NEW_TOKENS):
                token = int(model(input_ids=ids[:, -window:]).logits[0, -1].argmax())
                if token == eos:
                    break
                written.append(token)
                ids = torch.cat([ids, ids.new_tensor([[token]])], dim=1)
            out.append(decode(arch, tokenizer_dir, written))
    return out


def _gpt_beam(model: torch.nn.Module, ids: torch.Tensor, num_beams: int, eos: int) -> list[int]:
    prompt = ids[:, -model.config.n_positions:]
    out = beam_search(PromptAsMemory("gpt", model), prompt, None, MAX_NEW_TOKENS, num_beams,
                      decoder_start_token_id=int(prompt[0, -1]), eos_token_id=eos, pad_token_id=eos)
    return out[0, 1:].tolist()  # after the prompt's last token (decode stops at the first </s>)


def decode_eos(arch: str, tokenizer_dir: str | Path) -> int:
    from ..features import load_tokenizer

    return int(load_tokenizer(arch, tokenizer_dir).vocab.eos)


def generation_scorer(model_arch: str, prompts: list[dict[str, np.ndarray]], pairs: list[TextPair], collate: Callable,
                      tokenizer_dir: str | Path, kind: str, *, num_beams: int = 1, samples: int = 0
                      ) -> Callable[[torch.nn.Module, Any], dict[str, Any]]:
    """``evaluate(model, device)``: the kind's scores of what the model writes for ``pairs``
    (``samples``: also the first few sources, references and outputs, under ``samples``)."""
    metrics = KIND_METRICS.get(kind, KIND_METRICS["text"])

    def evaluate(model: torch.nn.Module, device) -> dict[str, Any]:
        written = write(model, model_arch, prompts, collate, tokenizer_dir, num_beams=num_beams, device=device)
        scores: dict[str, Any] = {**generation_scores(written, [p.target for p in pairs], metrics),
                                  "examples": len(pairs), "num_beams": num_beams}
        if samples:
            scores["samples"] = [{"source": p.source, "reference": p.target, "written": w}
                                 for p, w in zip(pairs[:samples], written)]
        return scores

    return evaluate
