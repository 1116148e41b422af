"""ELMo (Peters et al., 2018): a character CNN, a two-layer biLSTM, a shared softmax.

Read top to bottom:

1. ``CharCNN``: every token is a row of character ids (the bilm scheme of
   ``tokenization/chars.py``); a 16-dim character embedding, one convolution per width
   max-pooled over the characters, highway layers and a linear projection give one vector
   per token, whatever the word (no out-of-vocabulary tokens on the input side).
2. ``BiLSTMEncoder``: a forward LSTM stack reads positions 0..L-1, a separate backward stack
   reads each row's real tokens from last to first. Each LSTM has a projection (LSTMP: TF's
   ``LSTMCell(num_proj=...)``, torch's ``proj_size``), and from the second layer on a residual
   adds the layer's input to its output. The two directions never see each other's states.
3. ``ElmoBiLM``: one softmax shared by both directions; the forward LM predicts the next word
   (``labels``), the backward LM the previous word (``backward_labels``).
4. ``ScalarMix`` and ``ElmoForSequenceClassification``: the downstream use, ELMo_k =
   gamma * sum_j softmax(s)_j h_{k,j} over the layers (paper eq. 1), mean-pooled here.

Traps: the loss is forward + backward cross entropy (the joint log likelihood, section 3.1),
twice what bilm-tf's training script minimises; the per-direction losses are in ``aux``. The
LSTM state starts at zero for every example (independent sentences, not bilm-tf's stateful
stream), and the softmax is a full one where bilm-tf samples. ``count_parameters`` exceeds the
published sizes; ``ElmoBiLM.published_parameter_count`` reproduces them exactly. Every choice
against the reference (allenai/bilm-tf) and the counts: docs/MODELS.md, "ELMo".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import (
    ConfigError,
    ModelOutput,
    check_batch,
    check_classifier,
    classification_loss,
    count_parameters,
    lm_loss,
    mean_state,
    preset,
)

# The bilm character scheme of tokenization/chars.py (models import torch only; a test checks
# that the two agree): bytes 0-255, then bos, eos, bow, eow, padding.
PAD_CHAR = 260
CHAR_VOCAB_SIZE = 261

ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))  # (width, count): 2048


# ----------------------------------------------------------------------------- config


@dataclass
class ElmoConfig:
    """Defaults are the original ELMo (2x4096_512_2048cnn_2xhighway); presets below.

    ``projection_dim`` is both the character CNN's output and the LSTMs' projected output: the
    residual between layers and the scalar mix need every layer the same width.
    ``vocab_size`` is the word vocabulary of the shared softmax: set it from the tokenizer.
    """

    vocab_size: int = 32000
    char_vocab_size: int = CHAR_VOCAB_SIZE
    char_embedding_dim: int = 16
    filters: tuple[tuple[int, int], ...] = ELMO_FILTERS
    char_activation: str = "relu"  # "relu" (published ELMo) or "tanh"
    n_highway: int = 2
    projection_dim: int = 512
    cell_dim: int = 4096  # LSTM memory cell size
    n_lstm_layers: int = 2
    max_characters: int = 50  # the char_table width the tokenizer should use (wider rows still work)
    dropout: float = 0.1
    cell_clip: float | None = None  # bilm-tf: 3.0 (slower step-by-step LSTM when set)
    proj_clip: float | None = None  # bilm-tf: 3.0
    # downstream (ElmoForSequenceClassification)
    freeze_bilm: bool = True  # the paper freezes the biLM and learns only the mix and the task model
    mix_layer_norm: bool = False  # per-token layer norm of each layer before mixing
    classifier_dropout: float = 0.5  # on the mixed representation (allennlp's Elmo default)
    # the pooled features standardised (BatchNorm without affine parameters, as MAE's linear
    # probe) before the linear classifier: a biLM's mean-pooled states share one large direction
    # and differ little from text to text, which a linear layer alone learns from too slowly
    classifier_norm: bool = True

    def __post_init__(self) -> None:
        # lists from YAML / JSON -> tuples, so configs compare and hash the same
        if isinstance(self.filters, (list, tuple)) and all(isinstance(f, (list, tuple)) for f in self.filters):
            self.filters = tuple(tuple(f) for f in self.filters)

    def validate(self) -> None:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"ElmoConfig.{name} must be a positive integer, got {value!r}")

        for name in ("vocab_size", "char_vocab_size", "char_embedding_dim", "projection_dim", "cell_dim",
                     "n_lstm_layers", "max_characters"):
            positive(name)
        if not isinstance(self.n_highway, int) or self.n_highway < 0:
            raise ConfigError(f"ElmoConfig.n_highway must be >= 0, got {self.n_highway!r}")
        if self.char_vocab_size <= PAD_CHAR:
            raise ConfigError(f"ElmoConfig.char_vocab_size must exceed the padding character {PAD_CHAR}, got {self.char_vocab_size}")
        if not self.filters or not all(
            isinstance(f, (tuple, list)) and len(f) == 2 and all(isinstance(v, int) and v >= 1 for v in f) for f in self.filters
        ):
            raise ConfigError(f"ElmoConfig.filters must be a non-empty sequence of (width, count) positive pairs, got {self.filters!r}")
        if self.char_activation not in ("relu", "tanh"):
            raise ConfigError(f"ElmoConfig.char_activation must be 'relu' or 'tanh', got {self.char_activation!r}")
        if self.projection_dim > self.cell_dim:
            raise ConfigError(f"ElmoConfig.projection_dim ({self.projection_dim}) must not exceed cell_dim ({self.cell_dim})")
        widest = max(w for w, _ in self.filters)
        if self.max_characters < max(3, widest):
            raise ConfigError(f"ElmoConfig.max_characters ({self.max_characters}) must be at least 3 (bow, a byte, eow) "
                              f"and the widest filter ({widest})")
        for name in ("dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"ElmoConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"ElmoConfig.{name} must be None or > 0, got {value}")

    @property
    def cnn_dim(self) -> int:
        return sum(count for _, count in self.filters)

    @classmethod
    def from_name(cls, name: str, **overrides) -> ElmoConfig:
        """A preset by name, with ``overrides`` (unknown names are a ``ConfigError``)."""
        return preset(PRESETS, "ELMo", name, **overrides)


def from_name(name: str, **overrides) -> ElmoConfig:
    """``ElmoConfig.from_name``: a preset by name, with overrides."""
    return ElmoConfig.from_name(name, **overrides)


PRESETS: dict[str, ElmoConfig] = {
    # allennlp's published biLMs (trained on the 1B Word Benchmark with a 793,471-word
    # vocabulary); parameter counts exclude the softmax (docs/MODELS.md, "ELMo").
    "elmo-small": ElmoConfig(n_highway=1, projection_dim=128, cell_dim=1024),  # 13.6M
    "elmo-medium": ElmoConfig(n_highway=1, projection_dim=256, cell_dim=2048),  # 28.0M
    "elmo-original": ElmoConfig(n_highway=2, projection_dim=512, cell_dim=4096),  # 93.6M
    # CPU tests and smoke runs: the published filter bank divided by 16 (7 widths, 128 filters)
    "elmo-tiny": ElmoConfig(
        vocab_size=1000, filters=((1, 2), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 64)),
        n_highway=1, projection_dim=64, cell_dim=256,
    ),
}


# ----------------------------------------------------------------------------- character CNN


class Highway(nn.Module):
    """y = g * relu(W_h x + b_h) + (1 - g) * x,  g = sigmoid(W_g x + b_g)  (Srivastava et al. 2015)."""

    def __init__(self, dim: int, n_layers: int):
        super().__init__()
        self.transforms = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        self.gates = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_layers))
        for layer in (*self.transforms, *self.gates):
            nn.init.normal_(layer.weight, 0.0, math.sqrt(1.0 / dim))
            nn.init.zeros_(layer.bias)
        for gate in self.gates:
            nn.init.constant_(gate.bias, -2.0)  # bilm-tf: start close to the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform, gate in zip(self.transforms, self.gates):
            g = torch.sigmoid(gate(x))
            x = g * F.relu(transform(x)) + (1.0 - g) * x
        return x


class CharCNN(nn.Module):
    """Character ids (B, L, C) -> token embeddings (B, L, projection_dim)."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        E = config.char_embedding_dim
        self.embedding = nn.Embedding(config.char_vocab_size, E)  # the padding character is learned, as in bilm-tf
        self.convolutions = nn.ModuleList(nn.Conv1d(E, count, width) for width, count in config.filters)
        self.activation = torch.tanh if config.char_activation == "tanh" else F.relu
        self.highway = Highway(config.cnn_dim, config.n_highway)
        self.projection = nn.Linear(config.cnn_dim, config.projection_dim)
        self.widest = max(width for width, _ in config.filters)
        # bilm-tf's initialisation
        nn.init.uniform_(self.embedding.weight, -1.0, 1.0)
        for conv, (width, _) in zip(self.convolutions, config.filters):
            if config.char_activation == "relu":
                nn.init.normal_(conv.weight, 0.0, math.sqrt(1.0 / (width * E)))
            else:
                nn.init.uniform_(conv.weight, -0.05, 0.05)
            nn.init.zeros_(conv.bias)
        nn.init.normal_(self.projection.weight, 0.0, math.sqrt(1.0 / config.cnn_dim))
        nn.init.zeros_(self.projection.bias)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        B, L, C = char_ids.shape
        if C < self.widest:  # every filter needs at least one full window
            char_ids = F.pad(char_ids, (0, self.widest - C), value=PAD_CHAR)
        x = self.embedding(char_ids.reshape(B * L, -1)).transpose(1, 2)  # (B*L, E, C)
        # max over character positions, then the nonlinearity (bilm-tf's order)
        pooled = [self.activation(conv(x).amax(dim=-1)) for conv in self.convolutions]  # each (B*L, count)
        h = self.highway(torch.cat(pooled, dim=-1))  # (B*L, cnn_dim)
        return self.projection(h).view(B, L, -1)


# ----------------------------------------------------------------------------- biLSTM


class ProjectedLSTM(nn.Module):
    """One direction of one layer: an LSTM whose output is projected to ``output_dim`` (LSTMP).

    Without clipping this is torch's fused LSTM (cuDNN on a GPU). With ``cell_clip`` /
    ``proj_clip`` (TF's LSTMCell options, which the fused kernel lacks) the same weights run
    step by step: c is clipped after its update, the projected output after the projection.
    """

    def __init__(self, input_dim: int, cell_dim: int, output_dim: int,
                 cell_clip: float | None = None, proj_clip: float | None = None):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, cell_dim, batch_first=True,
                            proj_size=output_dim if output_dim < cell_dim else 0)
        self.cell_dim = cell_dim
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        with torch.no_grad():  # zero biases, forget gate +1 (TF's forget_bias=1.0); torch's gate order is i, f, g, o
            self.lstm.bias_ih_l0.zero_()
            self.lstm.bias_hh_l0.zero_()
            self.lstm.bias_ih_l0[cell_dim : 2 * cell_dim] = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, L, input_dim) -> (B, L, output_dim)
        if self.cell_clip is None and self.proj_clip is None:
            return self.lstm(x)[0]
        return self.stepwise(x)

    def stepwise(self, x: torch.Tensor) -> torch.Tensor:
        lstm = self.lstm
        projection = lstm.weight_hr_l0 if lstm.proj_size else None
        gates_x = F.linear(x, lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0)  # (B, L, 4H), all steps at once
        B, L, _ = x.shape
        h = x.new_zeros(B, lstm.proj_size or self.cell_dim)
        c = x.new_zeros(B, self.cell_dim)
        outputs = []
        for t in range(L):
            i, f, g, o = (gates_x[:, t] + h @ lstm.weight_hh_l0.T).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            if self.cell_clip is not None:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = torch.sigmoid(o) * torch.tanh(c)
            if projection is not None:
                h = h @ projection.T
            if self.proj_clip is not None:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        return torch.stack(outputs, dim=1)


def reversal_index(lengths: torch.Tensor, seq_len: int) -> torch.Tensor:
    """(B, L) positions that reverse each row's first ``lengths[b]`` entries and leave its
    padding in place: row [a b c pad pad] -> [c b a pad pad]. Applying it twice is the identity."""
    pos = torch.arange(seq_len, device=lengths.device)[None, :]  # (1, L)
    n = lengths[:, None]
    return torch.where(pos < n, n - 1 - pos, pos)


def reverse_padded(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x (B, L, D) reordered along L by a ``reversal_index``."""
    return x.gather(1, index[..., None].expand_as(x))


class BiLSTMEncoder(nn.Module):
    """Token embeddings (B, L, P) -> per-layer states, each (B, L, 2P) as [forward | backward]:
    layer 0 is the token embedding (duplicated for both directions), then one per LSTM layer.
    ``attention_mask`` must be right padding (1s then 0s per row); states at padding are 0.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        P, H = config.projection_dim, config.cell_dim

        def stack() -> nn.ModuleList:
            return nn.ModuleList(ProjectedLSTM(P, H, P, config.cell_clip, config.proj_clip) for _ in range(config.n_lstm_layers))

        self.forward_layers = stack()
        self.backward_layers = stack()
        self.dropout = nn.Dropout(config.dropout)

    def run_stack(self, layers: nn.ModuleList, x: torch.Tensor) -> list[torch.Tensor]:
        outputs = []
        for i, lstm in enumerate(layers):
            x_in = self.dropout(x)  # bilm-tf: dropout on each layer's input ...
            x = lstm(x_in) + x_in if i > 0 else lstm(x_in)  # ... and the residual from the second layer on
            outputs.append(x)
        return outputs

    def forward(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
        keep = attention_mask[..., None].to(embeddings.dtype)  # (B, L, 1)
        # The forward LSTM reads 0..L-1: trailing padding comes after every real token and cannot
        # reach them. The backward LSTM reads each row's real tokens reversed, padding still last.
        index = reversal_index(attention_mask.sum(dim=1), embeddings.size(1))
        forward_states = self.run_stack(self.forward_layers, embeddings)
        backward_states = self.run_stack(self.backward_layers, reverse_padded(embeddings, index))
        states = [torch.cat([embeddings, embeddings], dim=-1) * keep]
        for f, b in zip(forward_states, backward_states):
            states.append(torch.cat([f, reverse_padded(b, index)], dim=-1) * keep)
        return states


def token_mask(char_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, L) 1 for real tokens: ``attention_mask``, or else every token whose characters are not
    all padding. Rejects left or interleaved padding, which the backward reversal cannot handle."""
    if attention_mask is None:
        attention_mask = (char_ids != PAD_CHAR).any(dim=-1)
    mask = attention_mask.long()
    check_batch((mask == mask.cummin(dim=1).values).all(), "ELMo: attention_mask must be right padding (each row 1s, then 0s)")
    return mask


# ----------------------------------------------------------------------------- the biLM


class ElmoBiLM(nn.Module):
    """The pretraining model: ``model(**bilm_batch)``.

    Returns ``ModelOutput(logits=forward LM logits (B, L, V), loss=forward CE + backward CE,
    aux={"backward_logits", "forward_loss", "backward_loss"}, hidden_states=(n_layers + 1, B, L, 2P))``.
    ``input_ids`` is accepted and unused: the network reads characters; words are only targets.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.char_cnn = CharCNN(config)
        self.encoder = BiLSTMEncoder(config)
        self.dropout = nn.Dropout(config.dropout)
        self.softmax = nn.Linear(config.projection_dim, config.vocab_size)  # shared by both directions
        nn.init.normal_(self.softmax.weight, 0.0, 1.0 / math.sqrt(config.projection_dim))
        nn.init.zeros_(self.softmax.bias)

    def layer_states(self, char_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """([token embedding, LSTM layer 1, ...] each (B, L, 2P), the (B, L) token mask)."""
        mask = token_mask(char_ids, attention_mask)
        return self.encoder(self.char_cnn(char_ids), mask), mask

    def forward(self, char_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, backward_labels: torch.Tensor | None = None,
                input_ids: torch.Tensor | None = None) -> ModelOutput:
        states, _ = self.layer_states(char_ids, attention_mask)
        P = self.config.projection_dim
        top = self.dropout(states[-1])
        logits = self.softmax(top[..., :P])  # forward LM: predicts the next word
        backward_logits = self.softmax(top[..., P:])  # backward LM: predicts the previous word
        aux = {"backward_logits": backward_logits}
        loss = None
        if labels is not None:
            aux["forward_loss"] = lm_loss(logits, labels)
        if backward_labels is not None:
            aux["backward_loss"] = lm_loss(backward_logits, backward_labels)
        if labels is not None or backward_labels is not None:
            loss = aux.get("forward_loss", 0.0) + aux.get("backward_loss", 0.0)  # summed, as the paper's joint likelihood
        return ModelOutput(logits=logits, loss=loss, hidden_states=torch.stack(states), aux=aux)

    def published_parameter_count(self) -> int:
        """Parameters as allennlp's published ELMo figures count them: the character CNN and
        the biLSTM, without the softmax, and one bias per LSTM cell (torch's ``bias_hh`` only
        ever adds to ``bias_ih``)."""
        redundant = sum(m.lstm.bias_hh_l0.numel() for m in self.encoder.modules() if isinstance(m, ProjectedLSTM))
        return count_parameters(self.char_cnn) + count_parameters(self.encoder) - redundant


# ----------------------------------------------------------------------------- downstream


class ScalarMix(nn.Module):
    """gamma * sum_k softmax(s)_k * h_k (paper eq. 1): s (one per layer, init 0 = the plain
    average) and gamma (init 1) are learned per task. ``layer_norm``: normalise each layer per
    token (no affine parameters) before mixing."""

    def __init__(self, n_layers: int, layer_norm: bool = False):
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(()))
        self.layer_norm = layer_norm

    def forward(self, layers: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        layers = torch.stack(list(layers)) if not isinstance(layers, torch.Tensor) else layers  # (K, ..., D)
        if layers.size(0) != self.scalars.numel():
            raise ValueError(f"ScalarMix: expected {self.scalars.numel()} layers, got {layers.size(0)}")
        if self.layer_norm:
            layers = F.layer_norm(layers, layers.shape[-1:])
        weights = torch.softmax(self.scalars, dim=0).to(layers.dtype)
        return self.gamma * torch.einsum("k,k...->...", weights, layers)


class Standardise(nn.BatchNorm1d):
    """Features standardised per dimension (BatchNorm without affine parameters); a training
    batch of one example, which has no spread to measure, uses the running statistics."""

    def __init__(self, width: int):
        super().__init__(width, affine=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.size(0) < 2:
            return F.batch_norm(x, self.running_mean, self.running_var, training=False, eps=self.eps)
        return super().forward(x)


class ElmoForSequenceClassification(nn.Module):
    """ELMo representations (the biLM's layers, scalar-mixed) mean-pooled over the real tokens,
    standardised across the batch (``config.classifier_norm``: a BatchNorm without affine
    parameters, running statistics in evaluation), then a linear classifier (cross entropy;
    mean squared error when ``num_labels == 1``).
    With ``config.freeze_bilm`` (the paper's recipe) the biLM gets no
    gradient and runs without dropout; only the mix and the classifier learn.

    Load pretrained weights with ``load_bilm(pretrained_elmo_bilm)`` (the softmax is not used).
    """

    def __init__(self, config: ElmoConfig, num_labels: int = 2):
        super().__init__()
        config.validate()
        check_classifier(num_labels)
        self.config = config
        self.num_labels = num_labels
        self.char_cnn = CharCNN(config)
        self.encoder = BiLSTMEncoder(config)
        self.mix = ScalarMix(config.n_lstm_layers + 1, config.mix_layer_norm)
        self.dropout = nn.Dropout(config.classifier_dropout)
        width = 2 * config.projection_dim
        self.norm = Standardise(width) if config.classifier_norm else nn.Identity()
        self.classifier = nn.Linear(width, num_labels)
        if config.freeze_bilm:
            self.char_cnn.requires_grad_(False)
            self.encoder.requires_grad_(False)

    def load_bilm(self, bilm: ElmoBiLM) -> None:
        self.char_cnn.load_state_dict(bilm.char_cnn.state_dict())
        self.encoder.load_state_dict(bilm.encoder.state_dict())

    def train(self, mode: bool = True) -> ElmoForSequenceClassification:
        super().train(mode)
        if self.config.freeze_bilm:  # a frozen biLM computes its representations deterministically
            self.char_cnn.eval()
            self.encoder.eval()
        return self

    def forward(self, char_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, input_ids: torch.Tensor | None = None) -> ModelOutput:
        mask = token_mask(char_ids, attention_mask)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.config.freeze_bilm):
            states = self.encoder(self.char_cnn(char_ids), mask)
        mixed = self.dropout(self.mix(states))  # (B, L, 2P)
        pooled = self.norm(mean_state(mixed, mask))  # mean over real tokens, standardised
        logits = self.classifier(pooled)  # (B, num_labels)
        loss = classification_loss(logits, labels) if labels is not None else None
        return ModelOutput(logits=logits, loss=loss, hidden_states=mixed)
