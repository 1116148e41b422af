"""The headline numbers of intrinsic evaluation checked by value.

First on logits whose cross entropy is known in closed form (probabilities 1/2, 1/4, 1/8, 1/8
cost 1, 2, 3 and 3 bits), then for every objective on the tiny preset of each architecture that
trains with it: on two fixed validation batches, the loss ``evaluate_lm`` reports equals
``torch.nn.functional.cross_entropy`` on the same logits and targets, lined up here by hand
from what each objective's labels mean, and equals the model's own training loss; perplexity,
accuracy, bits per byte and the unigram baseline follow from their definitions.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmforge.evaluation.intrinsic import evaluate_lm, target_counts, tokenizer_bytes_per_token
from lmforge.models.layers import ModelOutput
from lmforge.models.registry import ARCHITECTURES, build_model
from lmforge.objectives.base import IGNORE_INDEX
from lmforge.objectives.registry import OBJECTIVES

LN2 = math.log(2)
# log-probabilities 1/2, 1/4, 1/8, 1/8: the cross entropy of label k is BITS[k] bits
PROBS = torch.tensor([0.5, 0.25, 0.125, 0.125], dtype=torch.float64)
BITS = [1, 2, 3, 3]


class FixedLogits(torch.nn.Module):
    """A model that returns given logits (one tensor per call, in order) and records its inputs."""

    def __init__(self, *outputs: dict[str, torch.Tensor]):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.outputs = list(outputs)
        self.calls: list[dict] = []

    def forward(self, **inputs):
        self.calls.append({**inputs, "training": self.training})
        out = self.outputs[len(self.calls) - 1]
        return ModelOutput(logits=out["logits"], aux={k: v for k, v in out.items() if k != "logits"})


def _logits(rows: int, cols: int) -> torch.Tensor:
    """(rows, cols, 4) logits, every position predicting PROBS (up to a constant: softmax drops it)."""
    return (PROBS.log() + 7.0).float().expand(rows, cols, 4).clone()


# ----------------------------------------------------------------------------- closed-form values


def test_loss_perplexity_accuracy_and_bits_per_byte_by_hand():
    # two batches with different numbers of predicted tokens: the loss is the mean over tokens,
    # not the mean of the batches' means
    b1 = {"input_ids": torch.zeros(1, 5, dtype=torch.long), "labels": torch.tensor([[0, 1, 2, 3, IGNORE_INDEX]])}
    b2 = {"input_ids": torch.zeros(1, 2, dtype=torch.long), "labels": torch.tensor([[0, IGNORE_INDEX]])}
    model = FixedLogits({"logits": _logits(1, 5)}, {"logits": _logits(1, 2)})
    model.train()
    # 2 tokens of the tokenizer cover 3 bytes of text: 1.5 bytes per token
    tokens, n_bytes = 2, 3
    result = evaluate_lm(model, [b1, b2], "mlm", vocab_size=4, bytes_per_token=n_bytes / tokens)

    bits = Fraction(1 + 2 + 3 + 3 + 1, 5)  # labels 0, 1, 2, 3 and 0
    loss_nats = float(bits) * LN2
    assert result["predicted_tokens"] == 5
    assert result["loss"] == pytest.approx(loss_nats, rel=1e-6)
    assert result["perplexity"] == pytest.approx(2 ** float(bits), rel=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(result["loss"]), rel=1e-12)
    assert result["accuracy"] == pytest.approx(2 / 5)  # the argmax is always id 0
    assert result["uniform_loss"] == pytest.approx(math.log(4))
    # bits per byte = loss in nats x tokens / (ln 2 x bytes) = (2 bits) / (1.5 bytes per token) = 4/3
    assert result["bits_per_byte"] == pytest.approx(loss_nats * tokens / (LN2 * n_bytes), rel=1e-6)
    assert result["bits_per_byte"] == pytest.approx(float(bits / Fraction(3, 2)), rel=1e-6)
    assert model.training and [c["training"] for c in model.calls] == [False, False]  # evaluated in eval mode, restored


def test_uniform_logits_cost_log_vocabulary_size():
    batch = {"input_ids": torch.zeros(2, 3, dtype=torch.long), "labels": torch.tensor([[0, 1, 2], [3, 4, 5]])}
    result = evaluate_lm(FixedLogits({"logits": torch.zeros(2, 3, 8)}), [batch], "mlm", vocab_size=8, bytes_per_token=1.0)
    assert result["loss"] == pytest.approx(math.log(8)) and result["loss"] == pytest.approx(result["uniform_loss"])
    assert result["perplexity"] == pytest.approx(8.0)
    assert result["bits_per_byte"] == pytest.approx(3.0)  # log2(8) bits per token, one byte per token


def test_causal_lm_scores_position_t_against_token_t_plus_1():
    # labels are the inputs (GPT shifts inside the model): position t is scored on labels[t + 1]
    labels = torch.tensor([[2, 0, 1, 3]])
    logits = _logits(1, 4)
    logits[0, 3] = torch.tensor([0.0, 0.0, 0.0, 50.0])  # the last position predicts nothing: its logits must not count
    result = evaluate_lm(FixedLogits({"logits": logits}), [{"input_ids": labels, "labels": labels}], "clm", vocab_size=4)
    assert result["predicted_tokens"] == 3
    assert result["loss"] == pytest.approx((BITS[0] + BITS[1] + BITS[3]) / 3 * LN2, rel=1e-6)
    by_torch = F.cross_entropy(logits[0, :-1].double(), labels[0, 1:])
    assert result["loss"] == pytest.approx(by_torch.item(), rel=1e-6)


def test_bidirectional_lm_averages_both_directions_over_their_tokens():
    forward = torch.tensor([[1, 2, IGNORE_INDEX]])
    backward = torch.tensor([[IGNORE_INDEX, 0, 3]])
    backward_logits = _logits(1, 3).flip(-1)  # probabilities 1/8, 1/8, 1/4, 1/2: ids 3, 2, 1, 0 cost 1, 2, 3, 3 bits
    model = FixedLogits({"logits": _logits(1, 3), "backward_logits": backward_logits})
    batch = {"input_ids": torch.zeros(1, 3, dtype=torch.long), "labels": forward, "backward_labels": backward}
    result = evaluate_lm(model, [batch], "bilm", vocab_size=4)
    assert result["predicted_tokens"] == 4
    assert result["loss"] == pytest.approx((2 + 3 + 3 + 1) / 4 * LN2, rel=1e-6)


def test_unigram_baseline_is_the_add_one_smoothed_train_distribution():
    # training targets 0 0 0 1 2 over a vocabulary of 4: counts 3 1 1 0, add-one smoothed 4/9 2/9 2/9 1/9
    train = [{"labels": torch.tensor([[0, 0, 0], [1, 2, IGNORE_INDEX]])}]
    counts = target_counts(train, "mlm", 4)
    assert counts.tolist() == [3, 1, 1, 0]
    validation = {"input_ids": torch.zeros(1, 4, dtype=torch.long), "labels": torch.tensor([[0, 3, 1, IGNORE_INDEX]])}
    result = evaluate_lm(FixedLogits({"logits": torch.zeros(1, 4, 4)}), [validation], "mlm", vocab_size=4,
                         unigram_counts=counts, bytes_per_token=2.0)
    expected = -(math.log(4 / 9) + math.log(1 / 9) + math.log(2 / 9)) / 3
    assert result["unigram_loss"] == pytest.approx(expected, rel=1e-9)
    assert result["unigram_bits_per_byte"] == pytest.approx(expected / LN2 / 2.0, rel=1e-9)


def test_unigram_baseline_on_its_training_tokens_approaches_their_entropy():
    # 3000 copies of 0 0 0 1: smoothing is negligible, the baseline is H(3/4, 1/4) = 0.8113 bits
    tokens = torch.tensor([[0, 0, 0, 1]]).repeat(3000, 1)
    counts = target_counts([{"labels": tokens}], "mlm", 2)
    assert counts.tolist() == [9000, 3000]
    result = evaluate_lm(FixedLogits({"logits": torch.zeros(3000, 4, 2)}), [{"input_ids": tokens, "labels": tokens}],
                         "mlm", vocab_size=2, unigram_counts=counts)
    entropy_bits = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert result["unigram_loss"] / LN2 == pytest.approx(entropy_bits, abs=1e-3)


def test_target_counts_follow_each_objectives_targets():
    labels = torch.tensor([[5, 1, 1, IGNORE_INDEX]])
    # causal LM: the first token is never a target
    assert target_counts([{"labels": labels}], "clm", 6).tolist() == [0, 2, 0, 0, 0, 0]
    # bidirectional LM: both directions' targets
    assert target_counts([{"labels": labels, "backward_labels": torch.tensor([[IGNORE_INDEX, 2, 5, 5]])}],
                         "bilm", 6).tolist() == [0, 2, 1, 0, 0, 3]


def test_no_predicted_tokens_is_an_error_naming_the_objective():
    batch = {"input_ids": torch.zeros(1, 2, dtype=torch.long), "labels": torch.full((1, 2), IGNORE_INDEX)}
    model = FixedLogits({"logits": torch.zeros(1, 2, 4)}).train()
    with pytest.raises(ValueError, match="^mlm: the validation batches contain no predicted tokens$"):
        evaluate_lm(model, [batch], "mlm", vocab_size=4)
    assert model.training


def test_bytes_per_token_comes_from_the_tokenizer_metrics(tmp_path):
    assert tokenizer_bytes_per_token(tmp_path) is None
    (tmp_path / "metrics.json").write_text(json.dumps({"bytes_per_token": 3.75, "tokens": 8}))
    assert tokenizer_bytes_per_token(tmp_path) == 3.75


# ----------------------------------------------------------------------------- every objective, a real tiny model

# (architecture, objective) -> (tiny preset, head): every architecture with every objective its heads take
MODELS = {
    ("gpt", "clm"): ("gpt-tiny", "lm"),
    ("bert", "mlm_nsp"): ("bert-tiny", "pretraining"),
    ("bert", "mlm"): ("bert-tiny", "mlm"),
    ("albert", "mlm_sop"): ("albert-tiny", "pretraining"),
    ("ernie", "knowledge_mlm"): ("ernie-tiny-test", "pretraining"),
    ("elmo", "bilm"): ("elmo-tiny", "bilm"),
    ("transformer_xl", "segments"): ("txl-tiny", "lm"),
    ("xlnet", "permutation"): ("xlnet-tiny", "lm"),
    ("bart", "denoising"): ("bart-tiny", "seq2seq"),
    ("t5", "span_corruption"): ("t5-tiny", "seq2seq"),
    ("switch", "span_corruption"): ("switch-tiny", "seq2seq"),
}
SHORT = {"clm": {"block_size": 32}, "mlm": {"max_length": 32}, "mlm_nsp": {"max_length": 32},
         "mlm_sop": {"max_length": 32}, "knowledge_mlm": {"max_length": 32, "min_count": 2},
         "span_corruption": {"input_length": 32}, "denoising": {"max_length": 32},
         "permutation": {"max_length": 32}, "segments": {"segment_length": 16, "batch_size": 4},
         "bilm": {"max_length": 16}}


def test_the_table_covers_every_architecture_and_objective():
    assert set(MODELS) == {(a, o) for a, spec in ARCHITECTURES.items() for o in spec.objectives}
    assert {o for _, o in MODELS} == set(OBJECTIVES)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Tokenizers of every kind and their token stores, on a small generated corpus."""
    from ..tokenization.conftest import tokenized_project

    return tokenized_project(tmp_path_factory.mktemp("intrinsic"), 160, SHORT)


def _targets(objective: str, out, batch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(logits (N, V), targets (N,)) of the predicted tokens, lined up from what the labels mean:
    a causal LM's labels are its inputs and position t predicts token t + 1; ELMo's forward and
    backward labels are already the next and the previous token; every other objective's labels
    sit at the position whose logits predict them (masked positions, decoder steps, target_mapping
    rows, Transformer-XL's pre-shifted segments)."""
    if objective == "clm":
        assert torch.equal(batch["labels"], batch["input_ids"])
        pairs = [(out.logits[:, :-1], batch["labels"][:, 1:])]
    elif objective == "bilm":
        ids, fwd, bwd = batch["input_ids"], batch["labels"], batch["backward_labels"]
        assert torch.equal(fwd[:, :-1][fwd[:, :-1] != IGNORE_INDEX], ids[:, 1:][fwd[:, :-1] != IGNORE_INDEX])
        assert torch.equal(bwd[:, 1:][bwd[:, 1:] != IGNORE_INDEX], ids[:, :-1][bwd[:, 1:] != IGNORE_INDEX])
        pairs = [(out.logits, fwd), (out.aux["backward_logits"], bwd)]
    else:
        if objective == "segments":
            labels = batch["labels"]
            assert torch.equal(labels[:, :-1], batch["input_ids"][:, 1:])
        pairs = [(out.logits, batch["labels"])]
    flat = []
    for logits, labels in pairs:
        logits, labels = logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1)
        keep = labels != IGNORE_INDEX
        flat.append((logits[keep], labels[keep]))
    return flat


def _own_loss(arch: str, objective: str, out) -> tuple[torch.Tensor, ...]:
    """The model's training loss of the predicted tokens alone (without NSP/SOP, router losses):
    the mean over one batch (ELMo: over each direction)."""
    if objective == "bilm":
        return out.aux["forward_loss"], out.aux["backward_loss"]
    if "mlm_loss" in out.aux or "lm_loss" in out.aux:
        return (out.aux.get("mlm_loss", out.aux.get("lm_loss")),)
    return (out.loss,)


@pytest.mark.parametrize("arch,objective", sorted(MODELS))
def test_validation_loss_equals_cross_entropy_of_the_same_logits(stores, arch, objective):
    from lmforge.datasets.open import open_objective
    from lmforge.training.data import ObjectiveDataModule
    from lmforge.training.tokenizer_config import tokenizer_overrides

    params = stores
    train, validation = open_objective(params, objective, "train"), open_objective(params, objective, "validation")
    vocab = validation.vocab
    data = ObjectiveDataModule(train, validation, batch_size=4, micro_steps=2, seed=0,
                               pad_id=vocab.pad if vocab.pad is not None else 0,
                               ordered=bool(getattr(validation, "ordered", False)))
    batches = list(data.validation_loader(2))
    train_batches = [data.collate([data.train_data[(0, i)] for i in range(j, j + 4)]) for j in (0, 4)]
    assert len(batches) == 2
    preset, head = MODELS[(arch, objective)]
    torch.manual_seed(0)
    model = build_model(preset, head=head, **tokenizer_overrides(preset, vocab))
    carry = arch == "transformer_xl"  # as pretraining evaluates it: memories carried from batch to batch
    counts = target_counts(train_batches, objective, vocab.size)
    bytes_per_token = 3.25  # any positive number: bits per byte divides by it

    result = evaluate_lm(model, batches, objective, vocab_size=vocab.size, unigram_counts=counts,
                         bytes_per_token=bytes_per_token, carry_memory=carry)
    assert model.training  # its mode restored

    # by hand: the same forward passes in eval mode, cross entropy summed over the predicted tokens
    model.eval()
    nll = own = correct = 0.0
    n = 0
    targets = []
    mems = None
    with torch.no_grad():
        for batch in batches:
            out = model(**batch, **({"mems": mems} if mems is not None else {}))
            mems = out.aux.get("mems") if carry else None
            pairs = _targets(objective, out, batch)
            for (logits, labels), own_mean in zip(pairs, _own_loss(arch, objective, out)):
                nll += F.cross_entropy(logits, labels, reduction="sum").item()
                own += own_mean.item() * len(labels)
                correct += (logits.argmax(-1) == labels).sum().item()
                n += len(labels)
                targets.append(labels)
    assert n > 0 and result["predicted_tokens"] == n
    assert result["loss"] == pytest.approx(nll / n, rel=1e-5)
    assert result["loss"] == pytest.approx(own / n, rel=1e-5)  # the model's own training loss agrees
    assert result["perplexity"] == pytest.approx(math.exp(nll / n), rel=1e-5)
    assert result["accuracy"] == pytest.approx(correct / n)
    assert result["bits_per_byte"] == pytest.approx(nll / n / LN2 / bytes_per_token, rel=1e-5)
    assert result["uniform_loss"] == pytest.approx(math.log(vocab.size))

    # the unigram baseline: counts of the training targets, lined up by hand as above, add-one smoothed
    by_hand = np.zeros(vocab.size, dtype=np.int64)
    for batch in train_batches:
        for _, labels in _targets(objective, _LabelsOnly(batch), batch):
            by_hand += np.bincount(labels.numpy(), minlength=vocab.size)
    assert by_hand.sum() > 0 and counts.tolist() == by_hand.tolist()
    p = (by_hand + 1) / (by_hand.sum() + vocab.size)
    unigram = -np.log(p[torch.cat(targets).numpy()]).mean()
    assert result["unigram_loss"] == pytest.approx(unigram, rel=1e-9)
    assert result["unigram_bits_per_byte"] == pytest.approx(unigram / LN2 / bytes_per_token, rel=1e-9)


class _LabelsOnly:
    """Stands in for a model output where only the labels are read (logits of the right rank)."""

    def __init__(self, batch):
        shape = batch["labels"].shape
        self.logits = torch.zeros(*shape, 1)
        self.aux = {"backward_logits": torch.zeros(*shape, 1)}


def test_at_bf16_mixed_the_forward_pass_runs_under_bf16_autocast_as_training_does():
    from lmforge.models.registry import build_model

    torch.manual_seed(0)
    model = build_model("gpt-tiny", head="lm", vocab_size=64, n_positions=16)
    ids = torch.randint(0, 64, (2, 16))
    batch = {"input_ids": ids, "labels": ids}
    full = evaluate_lm(model, [batch], "clm", vocab_size=64)
    mixed = evaluate_lm(model, [batch], "clm", vocab_size=64, precision="bf16-mixed")
    # by hand: the same pass under CPU bf16 autocast, the loss in float32
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(input_ids=ids).logits
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 64).float(), ids[:, 1:].reshape(-1)).item()
    assert mixed["loss"] == pytest.approx(expected, rel=1e-6)
    assert mixed["loss"] != full["loss"] and mixed["loss"] == pytest.approx(full["loss"], rel=2e-2)
    assert evaluate_lm(model, [batch], "clm", vocab_size=64, precision="32-true")["loss"] == full["loss"]
