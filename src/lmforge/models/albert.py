"""ALBERT (Lan et al. 2019): a BERT with factorised embeddings and one layer shared by the whole stack.

The two parameter reductions, top to bottom:

1. Factorised embedding: ids -> a small V x E table (E = 128), + position and segment
   embeddings (also E wide) -> LayerNorm over E -> dropout -> a linear E -> H projection.
   O(V*E + E*H) parameters instead of BERT's O(V*H).
2. Cross-layer sharing: ONE post-LN ``TransformerBlock`` (attention + FFN, H wide) applied
   ``n_layers`` times. The depth is compute, not parameters: ALBERT-base has ~12M parameters
   against BERT-base's 110M. (The reference code also allows groups of layers; all released
   models use one group of one layer, which is what this file builds.)

Then a pooler (tanh dense on the first token, [CLS]) as in BERT, and the heads:

- ``AlbertForPreTraining``: MLM + sentence-order prediction (SOP), loss = MLM + SOP.
  The MLM head projects H -> E (dense, activation, LayerNorm over E) and scores against the
  tied E-wide token embedding plus an output bias, so the output side is factorised too.
  SOP (0 = segments in order, 1 = swapped) is a linear layer on the pooled output.
- ``AlbertForMaskedLM``: the MLM head alone (no pooler, as in the reference).
- ``AlbertForSequenceClassification``: dropout + linear on the pooled output.

Batches are the MLM objectives': ``input_ids``, ``attention_mask``, ``token_type_ids``,
``labels`` (-100 = not predicted), and for SOP ``sentence_order_label``. The objectives'
``special_tokens_mask`` (statistics only) is accepted and ignored, so ``model(**batch)`` works.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .layers import (
    MLMHead,
    ModelOutput,
    TransformerBlock,
    attention_bias,
    check_classifier,
    check_pooling,
    check_transformer_config,
    classification_loss,
    init_normal,
    mean_state,
    preset,
)


# ----------------------------------------------------------------------------- config


SHARING = ("all", "attention", "none")


@dataclass
class AlbertConfig:
    """ALBERT hyper-parameters; the defaults are ALBERT-base (~12M parameters)."""

    vocab_size: int = 30000
    embedding_size: int = 128  # E: the factorised embedding width
    d_model: int = 768  # H
    n_layers: int = 12  # applications of the one shared block
    n_heads: int = 12
    d_ff: int = 3072
    act: str = "gelu_tanh"  # "gelu_new" in the released ALBERT configs
    max_positions: int = 512
    type_vocab_size: int = 2  # segments A and B
    dropout: float = 0.0  # ALBERT v2 trains without dropout (v1 used 0.1)
    attn_dropout: float = 0.0
    classifier_dropout: float = 0.1  # before the SOP layer (and the classifier, unless it is given its own)
    eps: float = 1e-12  # LayerNorm epsilon
    init_std: float = 0.02
    classifier_pooling: str = "default"  # sequence classifier input: "default" = pooled [CLS], "mean" = token mean
    # what the layers share (ALBERT section 4.5 measures the three): "all" = one block for every
    # layer (ALBERT); "attention" = one attention, each layer its own feed-forward and LayerNorms;
    # "none" = a block per layer (BERT with the factorised embedding). Only "all" exports to transformers.
    sharing: str = "all"
    # pre-LN blocks and a final LayerNorm (as BERT's norm_first); ALBERT is post-LN, and only
    # post-LN exports to transformers
    norm_first: bool = False

    def validate(self) -> None:
        check_transformer_config(self, ("vocab_size", "embedding_size", "d_model", "n_layers", "n_heads", "d_ff",
                                        "max_positions", "type_vocab_size"), ("dropout", "attn_dropout", "classifier_dropout"))
        check_pooling(self.classifier_pooling)
        if self.sharing not in SHARING:
            raise ConfigError(f"ALBERT.sharing must be one of {', '.join(SHARING)}, got {self.sharing!r}")

    @classmethod
    def from_name(cls, name: str, **overrides) -> "AlbertConfig":
        """A preset by name (``PRESETS``) with ``overrides``; unknown names are an error."""
        return preset(PRESETS, "ALBERT", name, **overrides)


PRESETS: dict[str, AlbertConfig] = {
    # ALBERT-base: L12 H768 A12, E128, ~12M parameters (table 2 of the paper)
    "albert-base": AlbertConfig(),
    # ALBERT-large: L24 H1024 A16, E128, ~18M
    "albert-large": AlbertConfig(d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    # a CPU-size model (the shape of BERT-tiny, L2 H128 A2, with E 64); set vocab_size from the tokenizer
    "albert-tiny": AlbertConfig(vocab_size=8192, embedding_size=64, d_model=128, n_layers=2, n_heads=2, d_ff=512),
}


# ----------------------------------------------------------------------------- body


class AlbertEmbeddings(nn.Module):
    """Token + position + segment embeddings, all E wide, then LayerNorm over E: (B, L) -> (B, L, E)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        c = config
        self.word = nn.Embedding(c.vocab_size, c.embedding_size)  # V x E, tied to the MLM output
        self.position = nn.Embedding(c.max_positions, c.embedding_size)
        self.token_type = nn.Embedding(c.type_vocab_size, c.embedding_size)
        self.norm = nn.LayerNorm(c.embedding_size, eps=c.eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        L = input_ids.shape[1]
        if L > self.position.num_embeddings:
            raise ValueError(f"sequence length {L} exceeds max_positions {self.position.num_embeddings}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(L, device=input_ids.device)  # (L,)
        x = self.word(input_ids) + self.token_type(token_type_ids) + self.position(positions)  # (B, L, E)
        return self.dropout(self.norm(x))


class AlbertModel(nn.Module):
    """Embeddings -> E->H projection -> the shared block n_layers times -> (hidden (B, L, H), pooled (B, H))."""

    def __init__(self, config: AlbertConfig, pooler: bool = True):
        super().__init__()
        config.validate()
        self.config = config
        c = config
        self.embeddings = AlbertEmbeddings(c)
        self.project = nn.Linear(c.embedding_size, c.d_model)  # E -> H
        def block() -> TransformerBlock:  # post-LN, as BERT (pre-LN with norm_first)
            return TransformerBlock(c.d_model, c.n_heads, c.d_ff, c.act, c.dropout, c.attn_dropout,
                                    norm_first=c.norm_first, eps=c.eps)

        if c.sharing == "all":
            self.block = block()  # one set of weights for every layer
        else:
            self.blocks = nn.ModuleList(block() for _ in range(c.n_layers))
            if c.sharing == "attention":
                for b in self.blocks[1:]:
                    b.attn = self.blocks[0].attn  # one attention module, registered in every layer
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.eps) if c.norm_first else None
        self.pooler = nn.Linear(c.d_model, c.d_model) if pooler else None

    def layers(self) -> list[nn.Module]:
        """The block each of the ``n_layers`` layers runs (the same one ``n_layers`` times with sharing "all")."""
        return [self.block] * self.config.n_layers if self.config.sharing == "all" else list(self.blocks)

    def flop_repeats(self) -> dict[nn.Module, int]:
        """Modules run more than once a pass (``models.flops`` counts their work so): the shared
        block, or the shared attention, ``n_layers`` times."""
        if self.config.sharing == "all":
            return {self.block: self.config.n_layers}
        if self.config.sharing == "attention":
            return {self.blocks[0].attn: self.config.n_layers}
        return {}

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        L = input_ids.shape[1]
        x = self.project(self.embeddings(input_ids, token_type_ids))  # (B, L, E) -> (B, L, H)
        bias = attention_bias(attention_mask, L, L, False, x.dtype, x.device)  # (B, 1, 1, L) or None
        for layer in self.layers():
            x = layer(x, bias)
        if self.final_norm is not None:
            x = self.final_norm(x)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, H) from [CLS]
        return x, pooled


# ----------------------------------------------------------------------------- heads


def mlm_head(config: AlbertConfig) -> MLMHead:
    """H -> E (dense, activation, LayerNorm over E), then scores against the tied E-wide embedding + a bias."""
    return MLMHead(config.d_model, config.embedding_size, config.vocab_size, config.act, config.eps)


class AlbertForPreTraining(nn.Module):
    """MLM + SOP. ``loss`` = MLM loss + SOP loss (either alone when only its labels are given);
    ``logits`` are the MLM scores (B, L, V), in training mode with labels the labelled
    positions' (N, V); ``aux`` holds ``sop_logits`` (B, 2) and, with
    labels, ``mlm_loss`` / ``sop_loss``."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config)
        self.mlm = mlm_head(config)
        self.sop_dropout = nn.Dropout(config.classifier_dropout)
        self.sop = nn.Linear(config.d_model, 2)  # 0 = in order, 1 = swapped
        init_normal(self, config.init_std)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        special_tokens_mask: torch.Tensor | None = None,  # objective statistics only; unused
    ) -> ModelOutput:
        hidden, pooled = self.albert(input_ids, attention_mask, token_type_ids)
        logits, mlm_loss = self.mlm.logits_and_loss(hidden, self.albert.embeddings.word.weight, labels)
        sop_logits = self.sop(self.sop_dropout(pooled))  # (B, 2)
        out = ModelOutput(logits=logits, hidden_states=hidden, aux={"sop_logits": sop_logits})
        if mlm_loss is not None:
            out.aux["mlm_loss"] = out.loss = mlm_loss
        if sentence_order_label is not None:
            out.aux["sop_loss"] = sop = F.cross_entropy(sop_logits.float(), sentence_order_label.reshape(-1))
            out.loss = sop if out.loss is None else out.loss + sop
        return out


class AlbertForMaskedLM(nn.Module):
    """MLM alone: ``logits`` (B, L, V) (in training mode with labels the labelled positions'
    (N, V)), ``loss`` over the positions whose label is not -100."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = AlbertModel(config, pooler=False)
        self.mlm = mlm_head(config)
        init_normal(self, config.init_std)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        special_tokens_mask: torch.Tensor | None = None,  # objective statistics only; unused
    ) -> ModelOutput:
        hidden, _ = self.albert(input_ids, attention_mask, token_type_ids)
        logits, loss = self.mlm.logits_and_loss(hidden, self.albert.embeddings.word.weight, labels)
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden)


class AlbertForSequenceClassification(nn.Module):
    """Dropout + linear on the pooled [CLS] state: ``logits`` (B, num_labels); ``labels`` (B,)
    are class ids, or float targets when ``num_labels == 1`` (regression, mean squared error).
    ``classifier_dropout`` None means ``config.classifier_dropout``."""

    def __init__(self, config: AlbertConfig, num_labels: int = 2, classifier_dropout: float | None = None):
        super().__init__()
        check_classifier(num_labels)
        self.config = config
        self.num_labels = num_labels
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout if classifier_dropout is None else classifier_dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_normal(self, config.init_std)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        special_tokens_mask: torch.Tensor | None = None,  # objective statistics only; unused
    ) -> ModelOutput:
        hidden, pooled = self.albert(input_ids, attention_mask, token_type_ids)
        if self.config.classifier_pooling == "mean":
            pooled = mean_state(hidden, attention_mask)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden)
