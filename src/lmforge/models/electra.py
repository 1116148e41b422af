"""ELECTRA's replaced-token detection (Clark et al., 2020) for the BERT-shaped encoders (BERT,
ERNIE): the ``rtd`` pretraining head.

A masked LM learns from the 15% of positions it masks; ELECTRA's discriminator learns from every
position. The head reads an ordinary masked-LM batch (the ``mlm`` / ``knowledge_mlm`` objectives'
keys: ``input_ids`` with some positions masked, ``labels`` holding the original id there and -100
elsewhere) and, in one forward pass:

1. a small **generator** (a masked LM of the same family, a third of the layers, the same width)
   predicts the masked positions: ``mlm_loss``, its cross entropy;
2. a replacement for each masked position is **sampled** from the generator's distribution (no
   gradient flows through the sample); the other positions keep their original token, so a
   position is "replaced" when its token differs from the original (a sample that happens to be
   the original counts as original, as in the paper);
3. the **discriminator**, the architecture's own encoder (``encoder``, what fine-tuning reads),
   sees that corrupted text and scores every real (non-padding) position as original or replaced:
   ``rtd_loss``, the mean binary cross entropy.

``loss = mlm_loss + RTD_WEIGHT * rtd_loss`` (50, the paper's weight). The generator and
the discriminator share their embedding module (token, segment and position embeddings and its
LayerNorm), the paper's "tie all embeddings". ``logits`` are the generator's masked-LM scores
((N, V) at the labelled positions in training mode, (B, L, V) in evaluation mode), so the
validation loss against the unigram baseline is the generator's; ``aux["rtd_logits"]`` (B, L) are
the discriminator's scores and ``aux["replaced"]`` (B, L) what it had to find. After pretraining
the encoder's weights load into the family's classifiers under the same names (``encoder.*``);
the generator and the detection head are left behind.

The discriminator head is transformers' ``ElectraDiscriminatorPredictions`` (dense, activation,
dense to one score), and ``rtd_loss`` its ``ElectraForPreTraining`` loss
(tests/models/test_electra.py compares them on the same corrupted batch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .bert import BertConfig, BertForMaskedLM, BertModel, init_weights
from .ernie import ErnieForMaskedLM, ErnieModel
from .layers import ModelOutput, activation, replace_config

RTD_WEIGHT = 50.0  # the discriminator's loss weight (Clark et al., 2020, section 3)


def generator_config(config: BertConfig) -> BertConfig:
    """The generator's config: the discriminator's, with a third of its layers (at least one).
    The width stays (the two share their embeddings), so the generator is about a third of the
    discriminator's transformer, inside the paper's best range (a quarter to a half)."""
    return replace_config(config, n_layers=max(1, config.n_layers // 3))


class DetectionHead(nn.Module):
    """One score per position, "replaced" above zero: dense ``D -> D``, activation, dense ``D -> 1``."""

    def __init__(self, d_model: int, act: str):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.act = activation(act)
        self.score = nn.Linear(d_model, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.score(self.act(self.dense(hidden))).squeeze(-1)  # (B, L)


def rtd_loss(scores: torch.Tensor, replaced: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean binary cross entropy of the discriminator's ``scores`` (B, L) against ``replaced``
    (B, L) over the real positions (``attention_mask`` 1; every position without one)."""
    target = replaced.float()
    if attention_mask is None:
        return F.binary_cross_entropy_with_logits(scores.float(), target)
    real = attention_mask.bool()
    return F.binary_cross_entropy_with_logits(scores.float()[real], target[real])


class BertForReplacedTokenDetection(nn.Module):
    """The ``rtd`` head of BERT; see the module docstring."""

    encoder_class = BertModel
    generator_class = BertForMaskedLM

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.encoder = self.encoder_class(config, pooler=False)  # the discriminator
        self.generator = self.generator_class(generator_config(config))
        self.detector = DetectionHead(config.d_model, config.act)
        init_weights(self.detector, config)
        self.generator.encoder.embeddings = self.encoder.embeddings  # tied: one module, two users

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                special_tokens_mask: torch.Tensor | None = None, **encoder_inputs: torch.Tensor) -> ModelOutput:
        generated = self.generator(input_ids, attention_mask, token_type_ids, labels=labels, **encoder_inputs)
        if labels is None:  # nothing masked: the discriminator reads the text as given
            hidden, _ = self.encoder(input_ids, attention_mask, token_type_ids, **encoder_inputs)
            return ModelOutput(logits=generated.logits, hidden_states=hidden,
                               aux={"rtd_logits": self.detector(hidden)})
        corrupted, replaced = self.corrupt(input_ids, labels, generated.logits)
        hidden, _ = self.encoder(corrupted, attention_mask, token_type_ids, **encoder_inputs)
        scores = self.detector(hidden)  # (B, L)
        detection = rtd_loss(scores, replaced, attention_mask)
        loss = generated.loss + RTD_WEIGHT * detection
        return ModelOutput(logits=generated.logits, loss=loss, hidden_states=hidden,
                           aux={"rtd_logits": scores, "replaced": replaced, "mlm_loss": generated.loss,
                                "rtd_loss": detection})

    @torch.no_grad()
    def corrupt(self, input_ids: torch.Tensor, labels: torch.Tensor,
                generator_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The discriminator's input and its targets: the original text (the labels where
        there is one) with each labelled position replaced by a sample from the generator's
        distribution there. ``generator_logits`` are (N, V) at the labelled positions or
        (B, L, V) for every position."""
        masked = labels != -100
        original = torch.where(masked, labels, input_ids)
        probs = F.softmax(generator_logits.float(), dim=-1)
        sampled = torch.multinomial(probs.reshape(-1, probs.size(-1)), 1)  # (N, 1) or (B x L, 1)
        if generator_logits.dim() == 2:
            corrupted = original.masked_scatter(masked, sampled.squeeze(-1))
        else:
            corrupted = torch.where(masked, sampled.view_as(original), original)
        return corrupted, corrupted != original


class ErnieForReplacedTokenDetection(BertForReplacedTokenDetection):
    """The ``rtd`` head of ERNIE (its embeddings, its masked LM as the generator)."""

    encoder_class = ErnieModel
    generator_class = ErnieForMaskedLM
