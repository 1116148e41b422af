"""Zero-shot multiple choice scored by a causal language model, with the definitions of
EleutherAI's lm-evaluation-harness (lm-eval 0.4), so that our numbers and lm-eval's are the same
numbers. Needs no lm-eval: ``evaluation.lm_eval_model`` wraps :class:`CausalScorer` for lm-eval.

- A ``loglikelihood`` request ``(context, continuation)`` is the sum of the log-probabilities of
  the continuation's tokens, each given the context and the continuation's tokens before it, and
  whether greedy decoding would have written exactly those tokens. The pair is tokenized as
  lm-eval's causal models do: trailing whitespace of the context moves to the continuation, the
  whole text is encoded, and the continuation's tokens are those after the context's own
  encoding. Our GPT reads ``eos`` first, the document separator it was trained with (an empty
  context is ``eos`` alone, lm-eval's rule for an empty context). An input longer than the model's
  positions keeps its last ``n_positions`` tokens (the continuation's are always scored).
- A question is a context, its choices and the gold index; each choice is scored as the
  continuation ``delimiter + choice`` (lm-eval's ``target_delimiter``, a space by default).
  ``acc``: the argmax of the summed log-likelihoods is the gold one; ``acc_norm``: the argmax of
  the log-likelihood divided by the choice's length in characters (``len(choice)``, as lm-eval's
  multiple-choice task computes it); ``acc_bytes``: divided by its length in UTF-8 bytes. Ties go
  to the first choice (``numpy.argmax``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import LmforgeError

# the architectures this scorer reads: causal LMs over the whole context
SUPPORTED = ("gpt",)
# why the others are not scored here (the report lists them as not applicable)
NOT_APPLICABLE = {
    "bert": "a masked-LM encoder: it gives no left-to-right log-likelihood of a continuation",
    "albert": "a masked-LM encoder: it gives no left-to-right log-likelihood of a continuation",
    "ernie": "a masked-LM encoder: it gives no left-to-right log-likelihood of a continuation",
    "elmo": "a bidirectional LSTM LM over characters: its word-level scoring is not lm-eval's token log-likelihood",
    "transformer_xl": "causal, but scored with its segment memory; not wired to the harness yet",
    "xlnet": "a permutation LM: its left-to-right scoring needs a perm_mask per token; not wired to the harness yet",
    "bart": "an encoder-decoder denoiser: the harness's seq2seq scoring is not wired yet",
    "t5": "an encoder-decoder span-corruption model: the harness's seq2seq scoring is not wired yet",
    "switch": "an encoder-decoder span-corruption model: the harness's seq2seq scoring is not wired yet",
}
METRICS = ("acc", "acc_norm", "acc_bytes")


class HarnessError(LmforgeError, ValueError):
    """A request or question the scorer cannot score (one line)."""


def not_applicable(arch: str) -> str | None:
    """Why ``arch`` is not scored (None: it is)."""
    if arch in SUPPORTED:
        return None
    return NOT_APPLICABLE.get(arch, "not a causal language model this scorer reads")


def split_pair(encode: Callable[[str], list[int]], context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval's causal models split a request (module docstring)."""
    if not context:
        return [], encode(continuation)
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = encode(context + continuation)
    context_ids = encode(context)
    return context_ids, whole[len(context_ids):]


class CausalScorer:
    """``loglikelihood`` requests scored by a causal LM whose ``model(input_ids).logits[:, t]``
    predicts token ``t + 1``. ``prefix``: ids read before every context (our GPT: ``[eos]``);
    ``window``: the most positions the model reads (None: no limit)."""

    def __init__(self, model: torch.nn.Module, encode: Callable[[str], list[int]], *, prefix: Sequence[int],
                 window: int | None = None, batch_size: int = 16, device: torch.device | str = "cpu"):
        if not prefix:
            raise HarnessError("a prefix token is needed: it conditions the first continuation token")
        self.model, self.encode, self.prefix = model, encode, list(prefix)
        self.window, self.batch_size, self.device = window, batch_size, torch.device(device)

    @torch.no_grad()
    def loglikelihood_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each (context ids, continuation ids)."""
        was_training = self.model.training
        self.model.eval()
        out: list[tuple[float, bool]] = []
        try:
            for start in range(0, len(pairs), self.batch_size):
                rows = []
                for context, continuation in pairs[start:start + self.batch_size]:
                    if not continuation:
                        raise HarnessError("an empty continuation has no tokens to score")
                    ids = self.prefix + list(context) + list(continuation)
                    inputs = ids[:-1]
                    if self.window is not None and len(inputs) > self.window:
                        inputs = inputs[-self.window:]
                    if len(continuation) > len(inputs):
                        raise HarnessError(f"a continuation of {len(continuation)} tokens is longer than the "
                                         f"{self.window} positions the model reads")
                    rows.append((inputs, list(continuation)))
                width = max(len(i) for i, _ in rows)
                # right padding: a causal model's positions never see what follows them
                batch = torch.zeros(len(rows), width, dtype=torch.long)
                for r, (inputs, _) in enumerate(rows):
                    batch[r, :len(inputs)] = torch.tensor(inputs)
                logprobs = F.log_softmax(self.model(batch.to(self.device)).logits.float(), dim=-1).cpu()
                for r, (inputs, continuation) in enumerate(rows):
                    n = len(continuation)
                    lp = logprobs[r, len(inputs) - n:len(inputs)]  # the positions predicting the continuation
                    target = torch.tensor(continuation)
                    out.append((float(lp.gather(1, target[:, None]).sum()), bool((lp.argmax(-1) == target).all())))
        finally:
            self.model.train(was_training)
        return out

    def loglikelihood(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each (context, continuation) text pair."""
        return self.loglikelihood_ids([split_pair(self.encode, c, x) for c, x in pairs])


@dataclass(frozen=True)
class Question:
    context: str
    choices: tuple[str, ...]
    gold: int


def choice_metrics(lls: Sequence[float], choices: Sequence[str], gold: int) -> dict[str, float]:
    """acc, acc_norm and acc_bytes of one question from its choices' log-likelihoods."""
    lls = np.asarray(lls, dtype=np.float64)
    chars = np.array([float(len(c)) for c in choices])
    nbytes = np.array([float(len(c.encode("utf-8"))) for c in choices])
    return {"acc": float(np.argmax(lls) == gold), "acc_norm": float(np.argmax(lls / chars) == gold),
            "acc_bytes": float(np.argmax(lls / nbytes) == gold)}


def score_questions(scorer: CausalScorer, questions: Sequence[Question], delimiter: str = " ") -> dict[str, float]:
    """The mean of each of ``METRICS`` over ``questions``, and their count ``n``."""
    if not questions:
        raise HarnessError("no questions to score")
    pairs = [(q.context, delimiter + c) for q in questions for c in q.choices]
    lls = [ll for ll, _ in scorer.loglikelihood(pairs)]
    totals = dict.fromkeys(METRICS, 0.0)
    at = 0
    for q in questions:
        for k, v in choice_metrics(lls[at:at + len(q.choices)], q.choices, q.gold).items():
            totals[k] += v
        at += len(q.choices)
    return {**{k: v / len(questions) for k, v in totals.items()}, "n": len(questions)}
