"""``lmforge generate``: text from the models that write it.

- GPT and XLNet recompute over the whole context at every step (GPT's context cut to its
  ``n_positions``; XLNet predicts a placeholder appended to the context that no position may
  see, through ``perm_mask`` and ``target_mapping``, as transformers does).
- Transformer-XL reads the prompt once and then one token per step, carrying its memory of the
  previous ``mem_len`` states.
- BART, T5 and Switch encode the input once and decode from their decoder start (BART's first
  token forced to ``<s>``). A fine-tuned text-to-text model gets its task's input layout
  (``prefix: text``) and writes its label words.

Greedy decoding and sampling (temperature, top-k, top-p, repetition penalty) go one token at a
time and report each token as it comes (``on_token``); beam search is
``models.generation.beam_search`` (the decoder-only models through ``PromptAsMemory``, which treats the
prompt as the "encoder output"), which takes no sampling options and returns at the end.
Generation stops at ``eos`` (the document end the causal models were trained on) or after
``max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..models.generation import PromptAsMemory, beam_search, full_logits
from .loading import InferenceError, LoadedModel
from .sampling import Sampling, choose

GENERATORS = ("gpt", "transformer_xl", "xlnet", "bart", "t5", "switch")
DECODER_ONLY = ("gpt", "transformer_xl", "xlnet")


@dataclass(frozen=True)
class Settings:
    max_new_tokens: int = 40
    num_beams: int = 1
    sampling: Sampling = Sampling()
    seed: int = 0
    length_penalty: float = 1.0

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise InferenceError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.num_beams < 1:
            raise InferenceError(f"num_beams must be at least 1, got {self.num_beams}")
        if self.num_beams > 1 and self.sampling.changes_logits:
            raise InferenceError("beam search takes no sampling options (sample, repetition penalty); use one or the other")


def check_generator(loaded: LoadedModel) -> None:
    if loaded.arch not in GENERATORS:
        raise InferenceError(f"{loaded.arch} does not generate text; the models that do: {', '.join(GENERATORS)}")
    if loaded.head == "classification":
        raise InferenceError(f"{loaded.directory}: a {loaded.arch} classifier (fine-tuned with a classification head) "
                             "does not generate text; use `lmforge predict`")
    if loaded.head in ("token_classification", "span_extraction"):
        raise InferenceError(f"{loaded.directory}: a {loaded.arch} {loaded.head} model does not generate text")


def prompt_ids(loaded: LoadedModel, text: str) -> list[int]:
    """The model's input for ``text``: GPT and Transformer-XL start a document after ``eos`` (their
    training stream's separator); XLNet reads the text alone; the encoder-decoders read their
    pretraining layout (T5: text ``</s>``; BART: ``<s>`` text ``</s>``) or, fine-tuned text to text,
    their task's."""
    if not text.strip():
        raise InferenceError("the prompt is empty")
    v, arch = loaded.vocab, loaded.arch
    if loaded.task and loaded.task.get("mode") == "generation":  # fine-tuned to write: its task's prompt
        from ..finetuning.generation.features import encode_pairs
        from ..finetuning.tasks import TextPair

        return encode_pairs([TextPair(text, "-")], arch, loaded.tokenizer.directory, loaded.task["max_length"],
                            prefix=loaded.task["prefix"], with_target=False)[0]["input_ids"].tolist()
    if loaded.task and loaded.task.get("mode") == "text_to_text":
        from ..finetuning.features import encode_examples
        from ..finetuning.tasks import Example

        if "prefix" not in loaded.task:
            raise InferenceError(f"{loaded.directory}: the task record has no prefix; fine-tune the model again")
        row = encode_examples([Example(text, None, "")], arch, loaded.tokenizer.directory, loaded.task["max_length"],
                              {"": 0}, prefix=loaded.task["prefix"], mode="classification")[0]
        return row["input_ids"].tolist()
    ids = loaded.tokenizer.encode([text])[0]
    if arch in ("gpt", "transformer_xl"):
        return [v.eos, *ids]  # GPT reads its last n_positions tokens
    if arch == "bart":
        ids = [v.bos, *ids, v.eos]
        loaded.check_length(ids)
    elif arch in ("t5", "switch"):
        ids = [*ids, v.eos]
    return ids


# ----------------------------------------------------------------------------- next-token logits


class _Steps:
    """Next-token logits for one sequence, one call per step."""

    def __init__(self, loaded: LoadedModel, prompt: list[int]):
        self.arch, self.model = loaded.arch, loaded.model
        self.prompt = torch.tensor([prompt], dtype=torch.long)
        self.mems = None
        if loaded.arch in DECODER_ONLY:
            self.start: list[int] = []
        else:
            c = self.model.config
            self.memory = self.model.encode(self.prompt, torch.ones_like(self.prompt))
            self.start = [c.decoder_start_id]
            self.forced = getattr(c, "bos_id", None) if loaded.arch == "bart" else None

    def next(self, generated: list[int]) -> torch.Tensor:
        if self.arch == "transformer_xl":
            new = self.prompt if not generated else torch.tensor([[generated[-1]]])
            out = self.model(new, mems=self.mems)
            self.mems = out.aux.get("mems")
            return out.logits[0, -1].float()
        if self.arch in DECODER_ONLY:
            ids = torch.cat([self.prompt, torch.tensor([generated], dtype=torch.long)], dim=1) if generated else self.prompt
            return full_logits(self.arch, self.model, ids)[0]
        dec = torch.tensor([[*self.start, *generated]], dtype=torch.long)
        logits = self.model.decode(dec, self.memory, torch.ones_like(self.prompt))[0, -1].float()
        if not generated and self.forced is not None:
            forced = torch.full_like(logits, float("-inf"))
            forced[self.forced] = 0.0
            return forced
        return logits

    def seen(self, generated: list[int]) -> torch.Tensor:
        """The ids the repetition penalty applies to: the prompt and the output for the causal
        models, the decoder's own ids for the encoder-decoders (as transformers)."""
        before = self.prompt[0].tolist() if self.arch in DECODER_ONLY else self.start
        return torch.tensor(sorted(set(before) | set(generated)), dtype=torch.long)


def _eos(loaded: LoadedModel) -> int | None:
    c = loaded.model.config
    return getattr(c, "eos_id", None) if loaded.arch not in DECODER_ONLY else loaded.vocab.eos


# ----------------------------------------------------------------------------- beam search


def _beam(loaded: LoadedModel, prompt: list[int], settings: Settings) -> list[int]:

    ids = torch.tensor([prompt], dtype=torch.long)
    if loaded.arch in DECODER_ONLY:
        eos = loaded.vocab.eos
        out = beam_search(PromptAsMemory(loaded.arch, loaded.model), ids, None, settings.max_new_tokens,
                          settings.num_beams, decoder_start_token_id=prompt[-1], eos_token_id=-1 if eos is None else eos,
                          pad_token_id=loaded.vocab.pad if loaded.vocab.pad is not None else 0,
                          length_penalty=settings.length_penalty)
    else:
        c = loaded.model.config
        out = beam_search(loaded.model, ids, torch.ones_like(ids), settings.max_new_tokens, settings.num_beams,
                          decoder_start_token_id=c.decoder_start_id, eos_token_id=c.eos_id, pad_token_id=c.pad_id,
                          forced_bos_token_id=getattr(c, "bos_id", None) if loaded.arch == "bart" else None,
                          length_penalty=settings.length_penalty)
    tokens = out[0, 1:].tolist()  # after the decoder start
    eos = _eos(loaded)
    return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens


# ----------------------------------------------------------------------------- the API


def generate_ids(loaded: LoadedModel, prompt: list[int], settings: Settings = Settings(),
                 on_token: Callable[[int], None] | None = None) -> list[int]:
    """The generated ids after ``prompt`` (eos included when reached; BART's forced ``<s>`` too)."""
    check_generator(loaded)
    if not prompt:
        raise InferenceError("the prompt is empty")
    with torch.inference_mode():
        if settings.num_beams > 1:
            out = _beam(loaded, prompt, settings)
            for token in out if on_token else ():
                on_token(token)
            return out
        steps = _Steps(loaded, prompt)
        generator = torch.Generator().manual_seed(settings.seed)
        eos, generated = _eos(loaded), []
        for _ in range(settings.max_new_tokens):
            logits = steps.next(generated)
            token = choose(logits, steps.seen(generated), settings.sampling, generator)
            generated.append(token)
            if on_token:
                on_token(token)
            if token == eos:
                break
        return generated


def generate_text(loaded: LoadedModel, text: str, settings: Settings = Settings(),
                  on_text: Callable[[str], None] | None = None) -> str:
    """The text the model writes after ``text``; ``on_text`` receives it piece by piece as tokens come."""
    shown: list[str] = [""]
    tokens: list[int] = []

    def on_token(token: int) -> None:
        tokens.append(token)
        now = loaded.decode(tokens)
        if on_text and now.startswith(shown[0]) and now != shown[0]:
            on_text(now[len(shown[0]):])
            shown[0] = now

    ids = generate_ids(loaded, prompt_ids(loaded, text), settings, on_token)
    final = loaded.decode(ids)
    if on_text and final != shown[0]:
        on_text(final[len(shown[0]):] if final.startswith(shown[0]) else "\n" + final)
    return final
