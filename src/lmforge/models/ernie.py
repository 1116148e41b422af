"""ERNIE 1.0 (Sun et al., 2019, "ERNIE: Enhanced Representation through kNowledge
IntEgration"): BERT with knowledge masking.

The network is BERT's (bert.py), unchanged; ERNIE's novelty is what it masks: whole words,
phrases and entities instead of single tokens. That lives on the data side, in
``lmforge.objectives.mlm`` (``knowledge_mlm``), and feeds these models the same batch keys as
BERT's MLM. What differs here:

1. The released configuration (PaddlePaddle/ERNIE's ``ernie_config.json`` for ERNIE 1.0
   base, Chinese): BERT-base shape with ``relu`` instead of GELU, a vocabulary of 18000 and
   513 positions. LayerNorm epsilon 1e-5: the reference was written in Paddle and
   ``fluid.layers.layer_norm`` defaults to 1e-5 (BERT's TF code used 1e-12).
2. An optional task-type embedding (``use_task_id``), added to the embedding sum. ERNIE 1.0
   has none; ERNIE 2.0 / 3.0 checkpoints in transformers' ``ErnieModel`` do (one id per
   pre-training task), so it is here to convert those exactly. With it, a batch may carry
   ``task_type_ids`` (B, L); without it that key is an error.

ERNIE's dialogue language model (DLM) has no public reference code and is not built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .bert import (
    BertConfig,
    BertEmbeddings,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
)
from .layers import ConfigError, preset


@dataclass
class ErnieConfig(BertConfig):
    # BERT's fields; these defaults are ERNIE 1.0 base's (the rest equal BERT-base's)
    vocab_size: int = 18000
    max_positions: int = 513
    act: str = "relu"
    eps: float = 1e-5
    # the task-type embedding of ERNIE 2.0 / 3.0 checkpoints (transformers' use_task_id)
    use_task_id: bool = False
    task_type_vocab_size: int = 3

    def validate(self) -> None:
        super().validate()
        if self.task_type_vocab_size < 1:
            raise ConfigError(f"task_type_vocab_size must be >= 1, got {self.task_type_vocab_size}")


PRESETS: dict[str, ErnieConfig] = {
    "ernie-1.0-base": ErnieConfig(),
    # Not a released model (PaddleNLP's "ernie-tiny" is a different, 3 x 1024 network): a CPU
    # size for tests and smoke runs, ERNIE's differences kept (relu, eps 1e-5).
    "ernie-tiny-test": ErnieConfig(vocab_size=1024, d_model=64, n_layers=2, n_heads=2, d_ff=128, max_positions=128),
}


def from_name(name: str, **overrides) -> ErnieConfig:
    """The preset ``name`` with ``overrides`` (unknown option names are a ConfigError)."""
    return preset(PRESETS, "ERNIE", name, **overrides)


class ErnieEmbeddings(BertEmbeddings):
    """BERT's embeddings, plus the task-type embedding when ``use_task_id``."""

    def __init__(self, config: ErnieConfig):
        if not isinstance(config, ErnieConfig):
            raise ConfigError(f"ERNIE models need an ErnieConfig, got {type(config).__name__}")
        super().__init__(config)
        self.task = nn.Embedding(config.task_type_vocab_size, config.d_model) if config.use_task_id else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                task_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.summed(input_ids, token_type_ids)  # (B, L, D)
        if self.task is not None:
            if task_type_ids is None:
                task_type_ids = torch.zeros_like(input_ids)
            x = x + self.task(task_type_ids)
        elif task_type_ids is not None:
            raise ValueError("task_type_ids given, but this model has no task-type embedding (use_task_id=False)")
        return self.dropout(self.norm(x))


class ErnieModel(BertModel):
    embeddings_class = ErnieEmbeddings


class ErnieForPreTraining(BertForPreTraining):
    """MLM + NSP, as BERT: the reference pre-training code has the same two heads (its
    dialogue task reuses the sentence-pair head on real / fake dialogues; not built here)."""

    encoder_class = ErnieModel


class ErnieForMaskedLM(BertForMaskedLM):
    encoder_class = ErnieModel


class ErnieForSequenceClassification(BertForSequenceClassification):
    encoder_class = ErnieModel
