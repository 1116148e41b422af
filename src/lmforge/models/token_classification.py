"""Token classification (tagging) and span extraction (extractive QA): logits per input position,
for every architecture.

Each head is its architecture's sequence classifier (the same network and parameter names, so a
pretrained backbone loads into it as it loads into the sequence classifier) with a linear layer
over every position's state in place of the pooled head (which is removed):

- BERT, ALBERT, ERNIE, GPT, Transformer-XL, XLNet: the last layer's state of each token (GPT and
  Transformer-XL read left to right only, so a token's tag is decided from its left context);
- ELMo: the biLM's layers scalar-mixed per token, as the ELMo paper feeds its taggers (a linear
  layer here where the paper trains a biLSTM-CRF on top);
- BART, T5 and Switch: the decoder's top state of each token, the decoder reading the input
  shifted right and attending over the whole encoded input (BART section 3.1, token
  classification).

``logits`` (B, L, num_labels); ``labels`` (B, L) tag ids with -100 where no tag is predicted
(special tokens, padding, a word's later sub-tokens); ``loss`` the mean cross entropy over the
labelled positions, plus Switch's router losses.

The span heads (``...ForQuestionAnswering``) are the same network with two outputs per position,
the answer's start and end scores, as BERT's SQuAD head: ``logits`` (B, L, 2); ``labels`` (B, 2)
the start and end positions; ``loss`` the mean of the two cross entropies over the positions
(padding excluded by ``attention_mask``), plus Switch's router losses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import albert, bart, bert, elmo, ernie, gpt, switch, t5, transformer_xl, xlnet
from .layers import ModelOutput, check_classifier

IGNORE_INDEX = -100
ROUTER_LOSSES = ("load_balancing_loss", "router_z_loss")
# the sequence classifiers' pooled heads (BERT's classifier, GPT's score, BART's head, XLNet's
# summary and projection, ...): replaced by the identity in the per-position heads
POOLED_HEADS = ("classifier", "score", "head", "summary", "logits_proj")


def state_width(config) -> int:
    """The width of the per-token states the tagger reads: ELMo's mix is both directions'
    projections, every other architecture's its model width."""
    if hasattr(config, "projection_dim"):
        return 2 * config.projection_dim
    return config.d_model


def with_router_losses(config, loss: torch.Tensor, aux: dict[str, torch.Tensor]) -> torch.Tensor:
    """The task loss plus Switch's router losses when its config adds them (``aux`` holds them)."""
    if getattr(config, "add_router_losses", False):
        return loss + sum(aux[k] for k in ROUTER_LOSSES if k in aux)
    return loss


def _named(cls: type, sequence_classifier: type, suffix: str, doc: str) -> type:
    cls.__name__ = cls.__qualname__ = sequence_classifier.__name__.replace("SequenceClassification", suffix)
    cls.__doc__ = f"{sequence_classifier.__name__}'s network {doc} (lmforge.models.token_classification)."
    return cls


def token_classifier(sequence_classifier: type[nn.Module]) -> type[nn.Module]:
    """The tagging head of the architecture whose sequence classifier is ``sequence_classifier``."""

    class TokenClassifier(sequence_classifier):  # type: ignore[misc, valid-type]
        def __init__(self, config, num_labels: int = 2, classifier_dropout: float | None = None):
            super().__init__(config, num_labels=num_labels)
            check_classifier(num_labels, classifier_dropout)
            for name in POOLED_HEADS:  # not read here: no parameter left without a gradient
                if isinstance(getattr(self, name, None), nn.Module):
                    setattr(self, name, nn.Identity())
            rate = classifier_dropout if classifier_dropout is not None else getattr(config, "dropout", 0.1)
            self.token_dropout = nn.Dropout(rate)
            self.token_classifier = nn.Linear(state_width(config), num_labels)
            nn.init.normal_(self.token_classifier.weight, std=0.02)
            nn.init.zeros_(self.token_classifier.bias)

        def forward(self, labels: torch.Tensor | None = None, **inputs: torch.Tensor) -> ModelOutput:
            out = super().forward(**inputs)
            states = out.hidden_states
            logits = self.token_classifier(self.token_dropout(states))  # (B, L, num_labels)
            result = ModelOutput(logits=logits, hidden_states=states,
                                 aux={k: v for k, v in out.aux.items() if k in ROUTER_LOSSES})
            if labels is None:
                return result
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1),
                                   ignore_index=IGNORE_INDEX)
            result.aux["tagging_loss"] = loss
            result.loss = with_router_losses(self.config, loss, result.aux)
            return result

    return _named(TokenClassifier, sequence_classifier, "TokenClassification", "tagging every position")


def span_extractor(sequence_classifier: type[nn.Module]) -> type[nn.Module]:
    """The extractive-QA head of the architecture whose sequence classifier is
    ``sequence_classifier``: its tagger with two outputs (start, end) per position."""
    tagger = token_classifier(sequence_classifier)

    class SpanExtractor(tagger):  # type: ignore[misc, valid-type]
        def __init__(self, config, num_labels: int = 2, classifier_dropout: float | None = None):
            if num_labels != 2:
                raise ValueError(f"a span head scores a start and an end per position (num_labels 2), got {num_labels}")
            super().__init__(config, num_labels=2, classifier_dropout=classifier_dropout)

        def forward(self, labels: torch.Tensor | None = None, **inputs: torch.Tensor) -> ModelOutput:
            out = super().forward(**inputs)
            mask = inputs.get("attention_mask")
            if mask is not None:  # padding never starts or ends an answer
                out.logits = out.logits.masked_fill((mask == 0).unsqueeze(-1), torch.finfo(out.logits.dtype).min)
            if labels is None:
                return out
            starts, ends = out.logits.float().unbind(-1)  # (B, L) each
            loss = (F.cross_entropy(starts, labels[:, 0]) + F.cross_entropy(ends, labels[:, 1])) / 2
            out.aux["span_loss"] = loss
            out.loss = with_router_losses(self.config, loss, out.aux)
            return out

    return _named(SpanExtractor, sequence_classifier, "QuestionAnswering",
                  "scoring each position as an answer's start and end")


BertForTokenClassification = token_classifier(bert.BertForSequenceClassification)
AlbertForTokenClassification = token_classifier(albert.AlbertForSequenceClassification)
ErnieForTokenClassification = token_classifier(ernie.ErnieForSequenceClassification)
GPTForTokenClassification = token_classifier(gpt.GPTForSequenceClassification)
TransformerXLForTokenClassification = token_classifier(transformer_xl.TransformerXLForSequenceClassification)
XLNetForTokenClassification = token_classifier(xlnet.XLNetForSequenceClassification)
ElmoForTokenClassification = token_classifier(elmo.ElmoForSequenceClassification)
BartForTokenClassification = token_classifier(bart.BartForSequenceClassification)
T5ForTokenClassification = token_classifier(t5.T5ForSequenceClassification)
SwitchForTokenClassification = token_classifier(switch.SwitchForSequenceClassification)

BertForQuestionAnswering = span_extractor(bert.BertForSequenceClassification)
AlbertForQuestionAnswering = span_extractor(albert.AlbertForSequenceClassification)
ErnieForQuestionAnswering = span_extractor(ernie.ErnieForSequenceClassification)
GPTForQuestionAnswering = span_extractor(gpt.GPTForSequenceClassification)
TransformerXLForQuestionAnswering = span_extractor(transformer_xl.TransformerXLForSequenceClassification)
XLNetForQuestionAnswering = span_extractor(xlnet.XLNetForSequenceClassification)
ElmoForQuestionAnswering = span_extractor(elmo.ElmoForSequenceClassification)
BartForQuestionAnswering = span_extractor(bart.BartForSequenceClassification)
T5ForQuestionAnswering = span_extractor(t5.T5ForSequenceClassification)
SwitchForQuestionAnswering = span_extractor(switch.SwitchForSequenceClassification)
