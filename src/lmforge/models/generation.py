"""Generation for encoder-decoder models (BART, T5): greedy search and beam search, and the
scoring of given target sequences (``candidate_scores``, rank classification). A decoder-only
model (GPT, Transformer-XL, XLNet) joins beam search through ``PromptAsMemory`` (its next-token
logits: ``full_logits``).

A model generates with this module when it has ``encode(input_ids, attention_mask) ->
(B, S, D)`` and ``decode(decoder_input_ids, encoder_hidden, encoder_attention_mask) ->
(B, T, V)`` (logits). When ``decode`` also takes a ``cache`` keyword, decoding is incremental:
generation passes one dict, ``{}`` at first, and the whole prefix on every call; the model
stores what it needs there and decodes only the positions it has not cached. Beam search
reorders the cache's rows (dim 0 of every tensor) to follow its beams, except under keys
containing ``cross.``, which must depend on the encoder output only. Without the keyword, or
with ``use_cache=False``, the decoder reruns over the whole prefix each step (same tokens).

Every sequence starts with ``decoder_start_token_id`` (BART: ``</s>``; T5: pad); with
``forced_bos_token_id`` the first generated token is that id (BART was trained on decoder
inputs ``</s> <s> x ...``). A sequence ends at ``eos_token_id``; positions after it hold
``pad_token_id``. Output: (B, T), T <= 1 + ``max_new_tokens``, as long as its longest row.

Greedy (``num_beams == 1``) takes the argmax at every step. Beam search (``num_beams > 1``) is
transformers' ``_beam_search`` algorithm: the same tokens when transformers runs with
``do_sample=False`` and none of its other logits processors. Traps when comparing: our
``early_stopping`` defaults to True (transformers: False); we never force eos at the last
position (BART's configs set ``forced_eos_token_id``: set it to None in the model's own
``generation_config``); we pad with ``pad_token_id`` where transformers uses eos when the pad
id is 0 (T5). The algorithm and the comparison in full: docs/MODELS.md, "Generation".
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import nn

from .layers import shift_right

_DONE = -1.0e9  # transformers' penalty for "cannot be chosen", added to scores (same arithmetic, same ties)


def generate(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
             max_new_tokens: int = 20, num_beams: int = 1, *, decoder_start_token_id: int, eos_token_id: int,
             pad_token_id: int, forced_bos_token_id: int | None = None, length_penalty: float = 1.0,
             early_stopping: bool | str = True, use_cache: bool = True) -> torch.Tensor:
    """Generate (B, T) token ids, ``decoder_start_token_id`` first: greedy when ``num_beams == 1``,
    beam search otherwise (the module docstring; docs/MODELS.md has the details)."""
    common = dict(decoder_start_token_id=decoder_start_token_id, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                  forced_bos_token_id=forced_bos_token_id, use_cache=use_cache)
    if num_beams == 1:
        return greedy_search(model, input_ids, attention_mask, max_new_tokens, **common)
    return beam_search(model, input_ids, attention_mask, max_new_tokens, num_beams, length_penalty=length_penalty,
                       early_stopping=early_stopping, **common)


# ----------------------------------------------------------------------------- helpers


class _Decoder:
    """The encoder output (computed once) and the decoder calls, cached or not, in eval mode."""

    def __init__(self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                 repeat: int, use_cache: bool):
        self.model = model
        self.memory = model.encode(input_ids, attention_mask)  # (B, S, D)
        self.memory_mask = attention_mask
        if repeat > 1:  # one copy per beam, the beams of an input adjacent: row b * repeat + j
            self.memory = self.memory.repeat_interleave(repeat, dim=0)
            if attention_mask is not None:
                self.memory_mask = attention_mask.repeat_interleave(repeat, dim=0)
        cacheable = "cache" in inspect.signature(model.decode).parameters
        self.cache = {} if (use_cache and cacheable) else None

    def next_logits(self, prefix: torch.Tensor) -> torch.Tensor:
        """Float32 logits (rows, V) of the token after ``prefix`` (rows, t)."""
        if self.cache is None:
            logits = self.model.decode(prefix, self.memory, self.memory_mask)
        else:
            logits = self.model.decode(prefix, self.memory, self.memory_mask, cache=self.cache)
        return logits[:, -1].float()

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep cache row ``rows[i]`` as row i (beam search)."""
        if self.cache is None:
            return
        for key, value in self.cache.items():
            if torch.is_tensor(value) and "cross." not in key:
                self.cache[key] = value.index_select(0, rows)


def _check(max_new_tokens: int, num_beams: int) -> None:
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if num_beams < 1:
        raise ValueError(f"num_beams must be at least 1, got {num_beams}")


class _eval_mode:
    """Generation runs without dropout and without gradients; the model's mode is restored."""

    def __init__(self, model: nn.Module):
        self.model, self.was_training = model, model.training

    def __enter__(self):
        self.no_grad = torch.no_grad()
        self.no_grad.__enter__()
        self.model.eval()

    def __exit__(self, *exc):
        self.model.train(self.was_training)
        self.no_grad.__exit__(*exc)


def _force(log_probs: torch.Tensor, token: int) -> torch.Tensor:
    """Restrict the distribution to ``token``: log-probability 0 there, -inf elsewhere."""
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, token] = 0.0
    return forced


# ----------------------------------------------------------------------------- greedy


def greedy_search(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  max_new_tokens: int = 20, *, decoder_start_token_id: int, eos_token_id: int, pad_token_id: int,
                  forced_bos_token_id: int | None = None, use_cache: bool = True) -> torch.Tensor:
    """The argmax token at every step until every row has produced eos or ``max_new_tokens``."""
    _check(max_new_tokens, 1)
    B = input_ids.size(0)
    with _eval_mode(model):
        decoder = _Decoder(model, input_ids, attention_mask, 1, use_cache)
        seqs = torch.full((B, 1), decoder_start_token_id, dtype=torch.long, device=input_ids.device)
        finished = torch.zeros(B, dtype=torch.bool, device=input_ids.device)
        for step in range(max_new_tokens):
            logits = decoder.next_logits(seqs)  # (B, V)
            if step == 0 and forced_bos_token_id is not None:
                token = torch.full((B,), forced_bos_token_id, dtype=torch.long, device=seqs.device)
            else:
                token = logits.argmax(dim=-1)
            token = token.masked_fill(finished, pad_token_id)  # finished rows only pad
            seqs = torch.cat([seqs, token[:, None]], dim=1)
            finished |= token == eos_token_id
            if bool(finished.all()):
                break
    return seqs


# ----------------------------------------------------------------------------- beam search


def _take(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """t (B, N, ...) -> (B, K, ...): entries ``index`` (B, K) along dim 1."""
    while index.dim() < t.dim():
        index = index.unsqueeze(-1)
    return torch.take_along_dim(t, index, dim=1)


def beam_search(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                max_new_tokens: int = 20, num_beams: int = 4, *, decoder_start_token_id: int, eos_token_id: int,
                pad_token_id: int, forced_bos_token_id: int | None = None, length_penalty: float = 1.0,
                early_stopping: bool | str = True, use_cache: bool = True) -> torch.Tensor:
    """The best finished hypothesis per input (docs/MODELS.md, "Generation"); ``num_beams=1``
    gives greedy's tokens when ``early_stopping`` is True."""
    _check(max_new_tokens, num_beams)
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    B, K, device = input_ids.size(0), num_beams, input_ids.device
    max_len = 1 + max_new_tokens
    n_cand = 2 * K  # enough candidates that K of them do not end, even if K end in eos
    in_top_k = torch.arange(n_cand, device=device) < K  # only these candidates may finish

    with _eval_mode(model):
        decoder = _Decoder(model, input_ids, attention_mask, K, use_cache)
        running = torch.full((B, K, max_len), pad_token_id, dtype=torch.long, device=device)
        running[:, :, 0] = decoder_start_token_id
        running_scores = torch.zeros(B, K, device=device)
        running_scores[:, 1:] = _DONE  # all beams start equal: expand only the first, once
        best = running.clone()  # finished hypotheses, best first
        best_scores = torch.full((B, K), _DONE, device=device)
        best_lengths = torch.ones(B, K, dtype=torch.long, device=device)
        is_finished = torch.zeros(B, K, dtype=torch.bool, device=device)  # slot holds a real hypothesis
        improvable = torch.ones(B, 1, dtype=torch.bool, device=device)  # the input has not stopped
        batch_offset = torch.arange(B, device=device)[:, None] * K

        cur_len = 1
        while True:
            logits = decoder.next_logits(running.view(B * K, max_len)[:, :cur_len])  # (B K, V)
            log_probs = F.log_softmax(logits, dim=-1)
            if cur_len == 1 and forced_bos_token_id is not None:
                log_probs = _force(log_probs, forced_bos_token_id)
            V = log_probs.size(-1)
            totals = (log_probs.view(B, K, V) + running_scores[:, :, None]).view(B, K * V)
            cand_scores, cand_index = totals.topk(n_cand, dim=1)  # (B, 2K), best first
            cand_beam, cand_token = cand_index // V, cand_index % V
            cand_seqs = _take(running, cand_beam).clone()  # (B, 2K, max_len)
            cand_seqs[:, :, cur_len] = cand_token
            ends = (cand_token == eos_token_id) | (cur_len + 1 >= max_len)

            # the best K candidates that did not end run on (ended ones pushed to the bottom)
            alive_scores = cand_scores + ends.float() * _DONE
            keep = alive_scores.topk(K, dim=1).indices
            running, running_scores = _take(cand_seqs, keep), _take(alive_scores, keep)
            decoder.reorder((_take(cand_beam, keep) + batch_offset).view(-1))

            # finished candidates among the first K compete with the finished hypotheses so far
            new_len = cur_len + 1 - 1  # generated tokens, eos included, the start token not
            final_scores = cand_scores / (new_len ** length_penalty)
            stopped = is_finished.all(dim=1, keepdim=True) if early_stopping is True else torch.zeros_like(improvable)
            final_scores = final_scores + stopped.float() * _DONE + (~improvable).float() * _DONE
            newly_finished = ends & in_top_k
            final_scores = final_scores + (~newly_finished).float() * _DONE
            merged = torch.cat([best_scores, final_scores], dim=1).topk(K, dim=1).indices
            best = _take(torch.cat([best, cand_seqs], dim=1), merged)
            best_scores = _take(torch.cat([best_scores, final_scores], dim=1), merged)
            best_lengths = _take(torch.cat([best_lengths, torch.full_like(cand_token, cur_len + 1)], dim=1), merged)
            is_finished = _take(torch.cat([is_finished, newly_finished], dim=1), merged)

            cur_len += 1
            # can the best running beam still beat the worst finished hypothesis?
            bound_len = (max_len - 1) if (early_stopping == "never" and length_penalty > 0) else (cur_len - 1)
            best_running = running_scores[:, :1] / (bound_len ** length_penalty)
            worst_finished = torch.where(is_finished, best_scores.min(dim=1, keepdim=True).values, _DONE)
            improvable = improvable & (best_running > worst_finished).any(dim=1, keepdim=True)
            all_full = bool(is_finished.all()) and early_stopping is True
            if not bool(improvable.any()) or all_full or bool(ends.all()):
                break

    length = int(best_lengths[:, 0].max())
    return best[:, 0, :length]


# ----------------------------------------------------------------------------- scoring


def candidate_scores(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     candidates: dict[int, list[int]]) -> torch.Tensor:
    """(B, K): the summed log-likelihood of each candidate target (in the order of the sorted
    class ids) given each input, by an encoder-decoder. The inputs are encoded once; only the
    decoder runs per candidate."""
    encoded = model.encode(input_ids, attention_mask)
    B = input_ids.shape[0]
    scores = torch.empty(B, len(candidates), device=input_ids.device)
    for j, (_, target) in enumerate(sorted(candidates.items())):
        labels = torch.tensor(target, device=input_ids.device).expand(B, -1)
        decoder_inputs = shift_right(labels, model.config.decoder_start_id, model.config.pad_id)
        logits = model.decode(decoder_inputs, encoded, attention_mask)
        scores[:, j] = -F.cross_entropy(logits.float().transpose(1, 2), labels, reduction="none").sum(-1)
    return scores


# ----------------------------------------------------------------------------- decoder-only models


def _window(model: nn.Module) -> int | None:
    return getattr(model.config, "n_positions", None)


def full_logits(arch: str, model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """(B, V) float logits of the token after each row of ``ids`` (B, L), recomputed over the
    whole row (GPT: its last ``n_positions`` tokens)."""
    if arch == "xlnet":
        B, L = ids.shape
        ids = torch.cat([ids, ids.new_zeros(B, 1)], dim=1)  # the placeholder for the next token
        perm_mask = torch.zeros(B, L + 1, L + 1, device=ids.device)
        perm_mask[:, :, -1] = 1.0  # no position sees it
        target = torch.zeros(B, 1, L + 1, device=ids.device)
        target[:, 0, -1] = 1.0
        return model(ids, perm_mask=perm_mask, target_mapping=target).logits[:, 0].float()
    window = _window(model)
    if window is not None and ids.size(1) > window:
        ids = ids[:, -window:]
    return model(ids).logits[:, -1].float()


class PromptAsMemory(nn.Module):
    """A decoder-only model in ``models.generation``'s encoder-decoder interface: ``encode``
    returns the prompt's ids and ``decode`` runs the model over the prompt (all but its last
    token, which is the decoder start) followed by the decoded prefix."""

    def __init__(self, arch: str, model: nn.Module):
        super().__init__()
        self.arch, self.inner = arch, model
        self.train(model.training)  # the generation module restores this mode on the inner model too

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return input_ids

    def decode(self, prefix: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None) -> torch.Tensor:
        ids = torch.cat([memory[:, :-1], prefix], dim=1)
        return full_logits(self.arch, self.inner, ids)[:, None]  # (B, 1, V): only the last position is read
