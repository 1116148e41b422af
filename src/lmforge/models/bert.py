"""BERT (Devlin et al., 2018): a bidirectional Transformer encoder pre-trained with masked
language modelling (MLM) and next-sentence prediction (NSP).

Read top to bottom:

1. ``BertConfig`` and ``PRESETS``: the sizes by name (``from_name("bert-base")``).
2. ``BertEmbeddings``: token + segment + learned position embeddings, summed, then
   LayerNorm and dropout.
3. ``BertModel``: the embeddings, a stack of ``TransformerBlock``s (layers.py; post-LN as in BERT, or
   pre-LN with a final LayerNorm with ``norm_first``) and the
   pooler, a tanh dense layer on the [CLS] state that the sentence-level heads read.
4. The heads: ``BertForPreTraining`` (MLM + NSP), ``BertForMaskedLM`` and
   ``BertForSequenceClassification``.

Every head takes an objective's batch as keyword arguments (``model(**batch)``, the keys of
``lmforge.objectives.mlm``): ``input_ids`` (B, L), ``attention_mask`` (B, L; 1 = real token,
0 = padding), ``token_type_ids`` (B, L; segment A = 0, B = 1), ``labels`` (B, L for the MLM:
the original id at the predicted positions, -100 elsewhere; (B,) for classification) and
``next_sentence_label`` (B,; 0 = B continues A, 1 = B is random). ``special_tokens_mask`` is
accepted and ignored: it only tells the objective which positions it may mask. A key a head
has no use for that would change the result (``next_sentence_label`` given to the MLM-only
head) is an error, not silently dropped.

The MLM output layer is the word-embedding matrix itself (tied), plus an output-only bias
per vocabulary entry, as in the reference: ``logits = LN(act(W h)) @ E^T + b``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
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


@dataclass
class BertConfig:
    vocab_size: int = 30522
    d_model: int = 768  # hidden size H
    n_layers: int = 12  # L
    n_heads: int = 12  # A
    d_ff: int = 3072  # feed-forward inner size, 4H in every released BERT
    max_positions: int = 512
    type_vocab_size: int = 2  # segments A and B
    act: str = "gelu"  # "gelu" (exact erf form, as released), "relu" or "gelu_tanh"
    dropout: float = 0.1  # on embeddings, residual branches and the classifier input
    attn_dropout: float = 0.1  # on the attention probabilities
    eps: float = 1e-12  # LayerNorm epsilon (TF BERT's value)
    pad_id: int | None = 0  # the [PAD] id: its embedding row starts at zero and gets no gradient from inputs
    init_std: float = 0.02
    classifier_pooling: str = "default"  # sequence classifier input: "default" = pooled [CLS], "mean" = token mean
    # pre-LN blocks and a final LayerNorm after the stack (Xiong et al. 2020; Cramming's choice for
    # short budgets) instead of BERT's post-LN; not transformers' BERT, so not exported
    norm_first: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_transformer_config(self, ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_positions",
                                        "type_vocab_size"), ("dropout", "attn_dropout"))
        check_pooling(self.classifier_pooling)
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ConfigError(f"pad_id ({self.pad_id}) must be in [0, vocab_size={self.vocab_size})")


# Google's released sizes (bert-base/large, and the 24 small BERTs of Turc et al., 2019, of which
# tiny/mini/small/medium are the named ones): A = H / 64, d_ff = 4H.
PRESETS: dict[str, BertConfig] = {
    "bert-base": BertConfig(),
    "bert-large": BertConfig(d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
    "bert-medium": BertConfig(d_model=512, n_layers=8, n_heads=8, d_ff=2048),
    "bert-small": BertConfig(d_model=512, n_layers=4, n_heads=8, d_ff=2048),
    "bert-mini": BertConfig(d_model=256, n_layers=4, n_heads=4, d_ff=1024),
    "bert-tiny": BertConfig(d_model=128, n_layers=2, n_heads=2, d_ff=512),
    # Not a released model: a CPU size for tests and smoke runs (a training step at 8 x 128
    # tokens takes a few milliseconds). Recipes override vocab_size with their tokenizer's.
    "bert-tiny-test": BertConfig(vocab_size=1024, d_model=64, n_layers=2, n_heads=2, d_ff=128, max_positions=128),
}


def from_name(name: str, **overrides) -> BertConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "BERT", name, **overrides)


# ----------------------------------------------------------------------------- encoder


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.position = nn.Embedding(config.max_positions, config.d_model)
        self.segment = nn.Embedding(config.type_vocab_size, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.eps)
        self.dropout = nn.Dropout(config.dropout)

    def summed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        """word + segment + position, before the LayerNorm: (B, L) -> (B, L, D)."""
        L = input_ids.size(1)
        if L > self.position.num_embeddings:
            raise ValueError(f"sequence length {L} exceeds max_positions ({self.position.num_embeddings})")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # one segment
        positions = torch.arange(L, device=input_ids.device)  # (L,), broadcast over the batch
        return self.word(input_ids) + self.segment(token_type_ids) + self.position(positions)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        return self.dropout(self.norm(self.summed(input_ids, token_type_ids)))


def init_weights(module: nn.Module, config: BertConfig) -> None:
    """N(0, init_std) weights, zero biases, unit LayerNorms; the [PAD] embedding row starts at
    zero, as in transformers, so a converted model and ours train alike."""
    init_normal(module, config.init_std)
    for m in module.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            with torch.no_grad():
                m.weight[m.padding_idx].zero_()


class BertModel(nn.Module):
    """The encoder: returns the last layer's states (B, L, D) and the pooled [CLS] state
    (B, D), or None when built without a pooler (the MLM-only head does not need it)."""

    embeddings_class = BertEmbeddings  # ERNIE swaps in its own (ernie.py)

    def __init__(self, config: BertConfig, pooler: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = self.embeddings_class(config)
        self.layers = nn.ModuleList(
            TransformerBlock(config.d_model, config.n_heads, config.d_ff, config.act, config.dropout,
                             config.attn_dropout, norm_first=config.norm_first, eps=config.eps)  # post-LN in BERT
            for _ in range(config.n_layers)
        )
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.eps) if config.norm_first else None
        self.pooler = nn.Linear(config.d_model, config.d_model) if pooler else None
        init_weights(self, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **embedding_inputs: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = self.embeddings(input_ids, token_type_ids, **embedding_inputs)  # (B, L, D)
        L = x.size(1)
        # An additive (B, 1, 1, L) mask, None when nothing is padded. Padding is masked as keys
        # only: every query (padding too) attends to the real tokens, so the outputs at real
        # positions do not depend on how much padding follows.
        bias = attention_bias(attention_mask, L, L, causal=False, dtype=x.dtype, device=x.device)
        for layer in self.layers:
            x = layer(x, bias)
        if self.final_norm is not None:
            x = self.final_norm(x)
        pooled = torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None  # (B, D) from [CLS]
        return x, pooled


# ----------------------------------------------------------------------------- heads


def mlm_head(config: BertConfig) -> MLMHead:
    """dense + act + LayerNorm (D wide), then scores against the tied word embeddings plus an output bias."""
    return MLMHead(config.d_model, config.d_model, config.vocab_size, config.act, config.eps)


def nsp_loss(nsp_logits: torch.Tensor, next_sentence_label: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(nsp_logits.float(), next_sentence_label.reshape(-1))


class BertForPreTraining(nn.Module):
    """MLM + NSP. ``logits`` are the MLM scores (B, L, V), in training mode with labels only the
    labelled positions' (N, V) (:meth:`MLMHead.logits_and_loss`); ``aux["nsp_logits"]`` (B, 2).
    The loss is the sum of the losses whose labels were given: MLM + NSP on an ``mlm_nsp``
    batch (the reference objective), MLM alone on an ``mlm`` batch (RoBERTa-style, the NSP
    head then stays untrained). ``aux`` also holds ``mlm_loss`` / ``nsp_loss``."""

    encoder_class = BertModel

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.encoder = self.encoder_class(config, pooler=True)
        self.mlm = mlm_head(config)
        self.nsp = nn.Linear(config.d_model, 2)
        init_weights(self.mlm, config)
        init_weights(self.nsp, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                next_sentence_label: torch.Tensor | None = None, special_tokens_mask: torch.Tensor | None = None,
                **encoder_inputs: torch.Tensor) -> ModelOutput:
        hidden, pooled = self.encoder(input_ids, attention_mask, token_type_ids, **encoder_inputs)
        logits, mlm_loss = self.mlm.logits_and_loss(hidden, self.encoder.embeddings.word.weight, labels)
        nsp_logits = self.nsp(pooled)  # (B, 2)
        losses = {}
        if mlm_loss is not None:
            losses["mlm_loss"] = mlm_loss
        if next_sentence_label is not None:
            losses["nsp_loss"] = nsp_loss(nsp_logits, next_sentence_label)
        loss = sum(losses.values()) if losses else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden, aux={"nsp_logits": nsp_logits, **losses})


class BertForMaskedLM(nn.Module):
    """MLM only (no pooler, no NSP head): ``logits`` (B, L, V), in training mode with labels
    the labelled positions' (N, V)."""

    encoder_class = BertModel

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.encoder = self.encoder_class(config, pooler=False)
        self.mlm = mlm_head(config)
        init_weights(self.mlm, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                special_tokens_mask: torch.Tensor | None = None, **encoder_inputs: torch.Tensor) -> ModelOutput:
        hidden, _ = self.encoder(input_ids, attention_mask, token_type_ids, **encoder_inputs)
        logits, loss = self.mlm.logits_and_loss(hidden, self.encoder.embeddings.word.weight, labels)
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden)


class BertForSequenceClassification(nn.Module):
    """A linear classifier on the pooled [CLS] state, for single sentences or pairs (the pair
    is one input, ``[CLS] A [SEP] B [SEP]``, told apart by ``token_type_ids``). ``logits``
    (B, num_labels); ``labels`` (B,) are class ids, or float targets when ``num_labels == 1``
    (regression, mean squared error). ``classifier_dropout`` None means ``config.dropout``."""

    encoder_class = BertModel

    def __init__(self, config: BertConfig, num_labels: int = 2, classifier_dropout: float | None = None):
        super().__init__()
        check_classifier(num_labels)
        self.config = config
        self.num_labels = num_labels
        self.classifier_dropout = classifier_dropout
        self.encoder = self.encoder_class(config, pooler=True)
        self.dropout = nn.Dropout(config.dropout if classifier_dropout is None else classifier_dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_weights(self.classifier, config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                special_tokens_mask: torch.Tensor | None = None, **encoder_inputs: torch.Tensor) -> ModelOutput:
        hidden, pooled = self.encoder(input_ids, attention_mask, token_type_ids, **encoder_inputs)
        if self.config.classifier_pooling == "mean":
            pooled = mean_state(hidden, attention_mask)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=hidden)
