"""Zero-shot multiple choice scored by a language model (causal or encoder-decoder), with the definitions of
EleutherAI's lm-evaluation-harness (lm-eval 0.4), so that our numbers and lm-eval's are the same
numbers. Needs no lm-eval: ``evaluation.lm_eval_model`` wraps a scorer for lm-eval.

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
- An encoder-decoder (:class:`Seq2SeqScorer`) is read as lm-eval reads a seq2seq model: context and
  continuation are encoded separately (after the same move of trailing whitespace); the context,
  framed as the model read text while pretraining, is the encoder's input, and the decoder scores
  the continuation's tokens followed by ``eos`` (a seq2seq tokenizer's special token, which lm-eval
  scores with the continuation).
- XLNet is read left to right (:class:`LeftToRight`): its permutation LM with the identity order,
  every prediction made by the query stream from the tokens before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import LmforgeError

# the architectures these scorers read: the causal LMs (XLNet left to right) and the encoder-decoders
SUPPORTED = ("gpt", "transformer_xl", "xlnet", "bart", "t5", "switch")
# why the others are not scored here (the report lists them as not applicable)
_MASKED = "a masked-LM encoder: it gives no left-to-right log-likelihood of a continuation"
NOT_APPLICABLE = {
    "bert": _MASKED,
    "albert": _MASKED,
    "ernie": _MASKED,
    "elmo": "a bidirectional LSTM LM over characters: its word-level scoring is not lm-eval's token log-likelihood",
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


@contextmanager
def _evaluating(model: torch.nn.Module):
    """``model`` in eval mode (no dropout), its own mode restored after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _scored(logprobs: torch.Tensor, target: Sequence[int]) -> tuple[float, bool]:
    """(summed log-probability of ``target``, whether each was the argmax) from the rows of
    ``logprobs`` (T, V) that predict it."""
    target = torch.tensor(list(target))
    return float(logprobs.gather(1, target[:, None]).sum()), bool((logprobs.argmax(-1) == target).all())


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
        out: list[tuple[float, bool]] = []
        with _evaluating(self.model):
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
                    # the positions predicting the continuation
                    out.append(_scored(logprobs[r, len(inputs) - len(continuation):len(inputs)], continuation))
        return out

    def loglikelihood(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each (context, continuation) text pair."""
        return self.loglikelihood_ids([split_pair(self.encode, c, x) for c, x in pairs])


class LeftToRight(torch.nn.Module):
    """XLNet as a causal LM: ``forward(input_ids).logits[:, t]`` predicts token ``t + 1`` from
    tokens ``0..t``. A filler token is appended so that the last input's successor has a position;
    ``perm_mask`` blocks every key at or after a query (the identity factorisation order) and
    ``target_mapping`` asks the query stream for positions ``1..L``, so no prediction sees its
    own token or any later one."""

    def __init__(self, model: torch.nn.Module, filler: int = 0):
        super().__init__()
        self.model, self.filler = model, filler
        self.train(model.training)  # a wrapper starts in training mode; it takes the model's

    def forward(self, input_ids: torch.Tensor):
        B, L = input_ids.shape
        ids = torch.cat([input_ids, input_ids.new_full((B, 1), self.filler)], dim=1)  # (B, L + 1)
        n = L + 1
        blocked = torch.ones(n, n, device=ids.device).triu()  # 1: query i may not attend key j (j >= i)
        targets = torch.eye(n, device=ids.device)[1:]  # (L, n): rows predict positions 1..L
        return self.model(ids, perm_mask=blocked.expand(B, n, n), target_mapping=targets.expand(B, L, n))


def split_pair_apart(encode: Callable[[str], list[int]], context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval's seq2seq models split a request: trailing
    whitespace moved to the continuation, each part encoded on its own."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    return encode(context), encode(continuation)


class Seq2SeqScorer:
    """``loglikelihood`` requests scored by an encoder-decoder called as
    ``model(input_ids, attention_mask, decoder_input_ids).logits`` (position t predicts decoder
    target t). The encoder reads ``encoder_prefix + context + encoder_suffix`` (the context cut to
    its last tokens when ``window`` is given); the decoder starts from ``decoder_start``, reads
    ``decoder_prefix`` (not scored), then scores the continuation's tokens and ``eos``."""

    def __init__(self, model: torch.nn.Module, encode: Callable[[str], list[int]], *, eos: int, decoder_start: int,
                 pad: int = 0, encoder_prefix: Sequence[int] = (), encoder_suffix: Sequence[int] = (),
                 decoder_prefix: Sequence[int] = (), window: int | None = None, batch_size: int = 16,
                 device: torch.device | str = "cpu"):
        self.model, self.encode, self.eos, self.decoder_start, self.pad = model, encode, eos, decoder_start, pad
        self.encoder_prefix, self.encoder_suffix = list(encoder_prefix), list(encoder_suffix)
        self.decoder_prefix = list(decoder_prefix)
        self.window, self.batch_size, self.device = window, batch_size, torch.device(device)

    def _encoder_ids(self, context: Sequence[int]) -> list[int]:
        context = list(context)
        if self.window is not None:
            room = self.window - len(self.encoder_prefix) - len(self.encoder_suffix)
            if room < 1:
                raise HarnessError(f"an encoder window of {self.window} positions leaves no room for the context")
            context = context[-room:] if len(context) > room else context
        return self.encoder_prefix + context + self.encoder_suffix

    @torch.no_grad()
    def loglikelihood_ids(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each (context ids, continuation ids); ``eos`` is scored
        after the continuation."""
        out: list[tuple[float, bool]] = []
        first = len(self.decoder_prefix)
        with _evaluating(self.model):
            for start in range(0, len(pairs), self.batch_size):
                rows = []
                for context, continuation in pairs[start:start + self.batch_size]:
                    if not continuation:
                        raise HarnessError("an empty continuation has no tokens to score")
                    targets = self.decoder_prefix + list(continuation) + [self.eos]
                    rows.append((self._encoder_ids(context), [self.decoder_start] + targets[:-1], targets))
                enc_width = max(len(e) for e, _, _ in rows)
                dec_width = max(len(d) for _, d, _ in rows)
                enc = torch.full((len(rows), enc_width), self.pad, dtype=torch.long)
                mask = torch.zeros(len(rows), enc_width, dtype=torch.long)
                dec = torch.full((len(rows), dec_width), self.pad, dtype=torch.long)  # right padding: causal decoder
                for r, (e, d, _) in enumerate(rows):
                    enc[r, :len(e)], mask[r, :len(e)], dec[r, :len(d)] = torch.tensor(e), 1, torch.tensor(d)
                logits = self.model(input_ids=enc.to(self.device), attention_mask=mask.to(self.device),
                                    decoder_input_ids=dec.to(self.device)).logits
                logprobs = F.log_softmax(logits.float(), dim=-1).cpu()
                for r, (_, _, targets) in enumerate(rows):
                    out.append(_scored(logprobs[r, first:len(targets)], targets[first:]))
        return out

    def loglikelihood(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each (context, continuation) text pair."""
        return self.loglikelihood_ids([split_pair_apart(self.encode, c, x) for c, x in pairs])


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


def score_questions(scorer: CausalScorer | Seq2SeqScorer, questions: Sequence[Question], delimiter: str = " ") -> dict[str, float]:
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
