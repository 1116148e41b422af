import math

import numpy as np
import pytest
import torch

from lmforge.models import elmo
from lmforge.models.elmo import (
    PRESETS, BiLSTMEncoder, CharCNN, ElmoBiLM, ElmoConfig, ElmoForSequenceClassification, ProjectedLSTM, ScalarMix,
    reversal_index, reverse_padded,
)
from lmforge.models.layers import ConfigError, count_parameters
from lmforge.objectives.base import Corpus, Document, Vocab
from lmforge.objectives.bilm import BidirectionalLM
from lmforge.objectives.features import pad_batch
from lmforge import chars
from lmforge.chars import EOW_CHAR, PAD_CHAR, char_table, encode_word

# torch's CPU build falls back from oneDNN for LSTMs with projections: expected, not a problem
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

TINY = ElmoConfig.from_name("elmo-tiny")
P = TINY.projection_dim


def words_to_chars(words: list[str], width: int = 50) -> torch.Tensor:
    """(1, L, width) bilm character ids of a sentence."""
    return torch.from_numpy(np.stack([encode_word(w, width) for w in words]).astype(np.int64))[None]


def random_sentence(rng: np.random.Generator, n: int) -> list[str]:
    letters = list("abcdefghijklmnopqrstuvwxyz")
    return ["".join(rng.choice(letters, int(rng.integers(1, 12)))) for _ in range(n)]


def tiny_model(seed: int = 0, **overrides) -> ElmoBiLM:
    torch.manual_seed(seed)
    return ElmoBiLM(ElmoConfig.from_name("elmo-tiny", **overrides)).eval()


def test_character_scheme_matches_the_tokenizer():
    # models import torch only, so elmo.py restates the two constants it needs
    assert elmo.PAD_CHAR == chars.PAD_CHAR and elmo.CHAR_VOCAB_SIZE == chars.CHAR_VOCAB_SIZE
    assert TINY.char_vocab_size == chars.CHAR_VOCAB_SIZE and TINY.max_characters == 50


def test_forward_backward_tiny():
    model = tiny_model().train()
    B, L = 3, 9
    char_ids = torch.randint(0, 261, (B, L, 50))
    labels = torch.randint(0, TINY.vocab_size, (B, L))
    out = model(char_ids=char_ids, labels=labels, backward_labels=labels)
    assert out.logits.shape == out.aux["backward_logits"].shape == (B, L, TINY.vocab_size)
    assert out.hidden_states.shape == (TINY.n_lstm_layers + 1, B, L, 2 * P)
    assert torch.isfinite(out.loss)
    torch.testing.assert_close(out.loss, out.aux["forward_loss"] + out.aux["backward_loss"])
    out.loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []
    # layer 0 is the token embedding, duplicated for both directions
    h0 = out.hidden_states[0]
    torch.testing.assert_close(h0[..., :P], h0[..., P:])


def test_layers_residual_from_the_second_layer_on():
    torch.manual_seed(9)
    encoder = BiLSTMEncoder(TINY).eval()
    x = torch.randn(2, 5, P)
    with torch.no_grad():
        states = encoder(x, torch.ones(2, 5, dtype=torch.long))
        f1 = encoder.forward_layers[0](x)
        b1 = encoder.backward_layers[0](x.flip(1))
        torch.testing.assert_close(states[1], torch.cat([f1, b1.flip(1)], -1))  # no residual from the embedding
        f2 = encoder.forward_layers[1](f1) + f1
        b2 = encoder.backward_layers[1](b1) + b1
        torch.testing.assert_close(states[2], torch.cat([f2, b2.flip(1)], -1))


def test_loss_at_init_is_twice_ln_vocab():
    model = tiny_model(1)
    torch.manual_seed(1)
    char_ids = torch.randint(0, 261, (8, 20, 50))
    labels = torch.randint(0, TINY.vocab_size, (8, 20))
    with torch.no_grad():
        out = model(char_ids=char_ids, labels=labels, backward_labels=labels.roll(1, dims=1))
    ln_v = math.log(TINY.vocab_size)
    assert abs(out.aux["forward_loss"].item() - ln_v) < 0.05 * ln_v
    assert abs(out.aux["backward_loss"].item() - ln_v) < 0.05 * ln_v
    assert abs(out.loss.item() - 2 * ln_v) < 0.05 * 2 * ln_v  # the two directions are summed


def test_forward_lm_sees_only_the_past_and_backward_lm_only_the_future():
    model = tiny_model(2)
    rng = np.random.default_rng(0)
    L, t = 10, 4
    base = words_to_chars(random_sentence(rng, L))
    later = base.clone()
    later[:, t + 1 :] = words_to_chars(random_sentence(rng, L - t - 1))  # change every token after t
    earlier = base.clone()
    earlier[:, :t] = words_to_chars(random_sentence(rng, t))  # change every token before t
    with torch.no_grad():
        o, o_later, o_earlier = (model(char_ids=c) for c in (base, later, earlier))

    def fwd(out):  # (L, ...): every layer's forward half and the forward logits, per position
        return torch.cat([out.hidden_states[:, 0, :, :P].permute(1, 0, 2).flatten(1), out.logits[0]], -1)

    def bwd(out):
        return torch.cat([out.hidden_states[:, 0, :, P:].permute(1, 0, 2).flatten(1), out.aux["backward_logits"][0]], -1)

    # forward LM: positions <= t untouched by later tokens, positions > t do change
    torch.testing.assert_close(fwd(o_later)[: t + 1], fwd(o)[: t + 1], rtol=0, atol=1e-5)
    assert (fwd(o_later)[t + 1 :] - fwd(o)[t + 1 :]).abs().amax(-1).min() > 1e-3
    # backward LM: positions >= t untouched by earlier tokens, positions < t do change
    torch.testing.assert_close(bwd(o_earlier)[t:], bwd(o)[t:], rtol=0, atol=1e-5)
    assert (bwd(o_earlier)[:t] - bwd(o)[:t]).abs().amax(-1).min() > 1e-3
    # and each direction does see the other side: the forward LM sees earlier tokens, the backward LM later ones
    assert (fwd(o_earlier)[t:] - fwd(o)[t:]).abs().amax(-1).min() > 1e-3
    assert (bwd(o_later)[: t + 1] - bwd(o)[: t + 1]).abs().amax(-1).min() > 1e-3


def test_padding_does_not_change_real_positions():
    model = tiny_model(3)
    rng = np.random.default_rng(1)
    rows = [words_to_chars(random_sentence(rng, n))[0] for n in (7, 3, 5)]
    L = 10  # appended padding on every row, more than the longest needs
    char_ids = torch.full((3, L, 50), PAD_CHAR, dtype=torch.long)
    mask = torch.zeros(3, L, dtype=torch.long)
    for b, r in enumerate(rows):
        char_ids[b, : len(r)] = r
        mask[b, : len(r)] = 1
    with torch.no_grad():
        batched = model(char_ids=char_ids, attention_mask=mask)
        derived = model(char_ids=char_ids)  # mask from all-padding character rows
        for b, r in enumerate(rows):
            alone = model(char_ids=r[None], attention_mask=torch.ones(1, len(r), dtype=torch.long))
            n = len(r)
            torch.testing.assert_close(batched.logits[b, :n], alone.logits[0], rtol=0, atol=1e-5)
            torch.testing.assert_close(batched.aux["backward_logits"][b, :n], alone.aux["backward_logits"][0], rtol=0, atol=1e-5)
            torch.testing.assert_close(batched.hidden_states[:, b, :n], alone.hidden_states[:, 0], rtol=0, atol=1e-5)
            assert batched.hidden_states[:, b, n:].abs().max() == 0  # states at padding are zeroed
    torch.testing.assert_close(derived.logits, batched.logits)
    with pytest.raises(ValueError, match="right padding"):
        model(char_ids=char_ids, attention_mask=mask.flip(1))


def test_reversal_reverses_only_real_tokens():
    x = torch.arange(10.0).view(2, 5, 1)
    index = reversal_index(torch.tensor([3, 5]), 5)
    assert reverse_padded(x, index)[..., 0].tolist() == [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]]
    torch.testing.assert_close(reverse_padded(reverse_padded(x, index), index), x)


def test_char_cnn_handles_long_words_and_other_widths():
    torch.manual_seed(4)
    cnn = CharCNN(TINY).eval()
    long_word = "x" * 78
    row50 = encode_word(long_word, 50)  # the tokenizer's cut: 48 bytes, eow last
    assert row50[-1] == EOW_CHAR and len(row50) == 50
    with torch.no_grad():
        wide = cnn(words_to_chars([long_word, "cat"], width=80))  # wider than max_characters: read whole
        assert wide.shape == (1, 2, P) and torch.isfinite(wide).all()
        # a short word's vector does not depend on how much padding follows it
        e50, e64 = cnn(words_to_chars(["cat", "a"], 50)), cnn(words_to_chars(["cat", "a"], 64))
        torch.testing.assert_close(e50, e64, rtol=0, atol=1e-6)
        # rows narrower than the widest filter (7) are padded to it
        narrow = torch.tensor([[[elmo.PAD_CHAR - 2, 97, EOW_CHAR]]])  # bow a eow
        padded = torch.nn.functional.pad(narrow, (0, 4), value=PAD_CHAR)
        torch.testing.assert_close(cnn(narrow), cnn(padded))
    # and the whole model runs on rows of any width
    model = tiny_model(4)
    with torch.no_grad():
        for width in (3, 7, 50, 80):
            assert model(char_ids=words_to_chars(["the", long_word, "end"], width)).logits.shape == (1, 3, TINY.vocab_size)


def test_clipped_lstm_matches_the_fused_one_and_clips():
    torch.manual_seed(5)
    x = torch.randn(2, 6, 8) * 3
    fused = ProjectedLSTM(8, 16, 4)
    stepwise = ProjectedLSTM(8, 16, 4, cell_clip=1e9, proj_clip=1e9)
    stepwise.load_state_dict(fused.state_dict())
    torch.testing.assert_close(stepwise(x), fused(x), rtol=1e-5, atol=1e-6)
    clipped = ProjectedLSTM(8, 16, 4, cell_clip=0.5, proj_clip=0.05)
    clipped.load_state_dict(fused.state_dict())
    assert clipped(x).abs().max() <= 0.05 + 1e-7 and fused(x).abs().max() > 0.05
    # no projection when projection_dim == cell_dim (bilm-tf does the same)
    assert ProjectedLSTM(8, 16, 16).lstm.proj_size == 0
    # the encoder with clipping runs end to end
    encoder = BiLSTMEncoder(ElmoConfig.from_name("elmo-tiny", cell_clip=3.0, proj_clip=3.0)).eval()
    states = encoder(torch.randn(2, 5, P), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]))
    assert len(states) == 3 and states[-1].shape == (2, 5, 2 * P)


def test_scalar_mix_is_the_weighted_sum():
    torch.manual_seed(6)
    layers = [torch.randn(2, 4, 6) for _ in range(3)]
    mix = ScalarMix(3)
    torch.testing.assert_close(mix(layers), sum(layers) / 3)  # init: the plain average, gamma 1
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.7)
    e = [math.exp(s) for s in (0.5, -1.0, 2.0)]
    expected = 1.7 * sum(w / sum(e) * h for w, h in zip(e, layers))
    torch.testing.assert_close(mix(layers), expected)
    torch.testing.assert_close(mix(torch.stack(layers)), expected)
    normed = ScalarMix(3, layer_norm=True)
    with torch.no_grad():
        normed.scalars.copy_(mix.scalars)
        normed.gamma.fill_(1.7)
    ln = [(h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5) for h in layers]
    torch.testing.assert_close(normed(layers), 1.7 * sum(w / sum(e) * h for w, h in zip(e, ln)))
    with pytest.raises(ValueError):
        mix(layers[:2])


def test_parameter_counts_match_the_published_models():
    # allennlp's table: small 13.6M, medium 28.0M, original 93.6M. They count the char
    # embedding (261 x 16), the CNN (sum w*16*n + n = 199,168), highway (2 x 2048^2 + 2 x 2048
    # each), the 2048 -> P projection (with bias) and four LSTMP cells, each
    # (P + P) x 4H weights + one 4H bias + an H x P projection; NOT the softmax.
    def expected(n_highway: int, P: int, H: int) -> int:
        cnn = 261 * 16 + sum(w * 16 * n + n for w, n in elmo.ELMO_FILTERS)
        highway = n_highway * (2 * 2048 * 2048 + 2 * 2048)
        lstm = 4 * (2 * P * 4 * H + 4 * H + H * P)
        return cnn + highway + 2048 * P + P + lstm

    published = {"elmo-small": (13.6, 13_593_296, (1, 128, 1024)),
                 "elmo-medium": (28.0, 28_027_728, (1, 256, 2048)),
                 "elmo-original": (93.6, 93_600_848, (2, 512, 4096))}
    for name, (millions, exact, shape) in published.items():
        config = ElmoConfig.from_name(name)
        with torch.device("meta"):  # no memory, no init time
            model = ElmoBiLM(config)
        count = model.published_parameter_count()
        assert count == exact == expected(*shape)
        assert round(count / 1e6, 1) == millions
        # what count_parameters sees on top: the softmax and torch's second LSTM bias (b_hh)
        H = config.cell_dim
        softmax = config.vocab_size * (config.projection_dim + 1)
        assert count_parameters(model) == count + softmax + 2 * config.n_lstm_layers * 4 * H
    # the small model with 2 highway layers would be 22.0M, not the published 13.6M
    assert round(expected(2, 128, 1024) / 1e6, 1) == 22.0
    assert PRESETS["elmo-small"].n_highway == 1 and PRESETS["elmo-original"].n_highway == 2


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        ElmoConfig.from_name("elmo-tiny", hidden_size=10)
    with pytest.raises(ConfigError, match="unknown ELMo preset"):
        elmo.from_name("elmo-huge")
    assert elmo.from_name("elmo-small", vocab_size=500) == ElmoConfig.from_name("elmo-small", vocab_size=500)
    for bad in (dict(projection_dim=512, cell_dim=256), dict(char_activation="gelu"), dict(max_characters=5),
                dict(filters=()), dict(filters=((0, 4),)), dict(dropout=1.0), dict(cell_clip=0.0),
                dict(char_vocab_size=260), dict(n_highway=-1), dict(vocab_size=0)):
        with pytest.raises(ConfigError):
            ElmoConfig.from_name("elmo-tiny", **bad)
    with pytest.raises(ConfigError):
        ElmoBiLM(ElmoConfig(n_lstm_layers=0))
    # lists (YAML) become tuples
    assert ElmoConfig.from_name("elmo-tiny", filters=[[1, 4], [3, 8]]).filters == ((1, 4), (3, 8))


def test_classifier_frozen_and_fine_tuned():
    torch.manual_seed(7)
    bilm = tiny_model(7)
    config = ElmoConfig.from_name("elmo-tiny")
    clf = ElmoForSequenceClassification(config, num_labels=3)
    clf.load_bilm(bilm)
    torch.testing.assert_close(clf.encoder.forward_layers[1].lstm.weight_hh_l0, bilm.encoder.forward_layers[1].lstm.weight_hh_l0)
    clf.train()
    assert not clf.encoder.training and not clf.char_cnn.training and clf.mix.training  # frozen biLM: no dropout
    char_ids = torch.full((2, 6, 50), PAD_CHAR, dtype=torch.long)
    char_ids[0, :6] = words_to_chars(random_sentence(np.random.default_rng(2), 6))[0]
    char_ids[1, :2] = words_to_chars(["hello", "world"])[0]
    out = clf(char_ids=char_ids, labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3) and out.hidden_states.shape == (2, 6, 2 * P)
    out.loss.backward()
    assert all(p.grad is None for p in (*clf.char_cnn.parameters(), *clf.encoder.parameters()))
    assert clf.mix.scalars.grad is not None and clf.mix.gamma.grad is not None and clf.classifier.weight.grad is not None
    # the mixed layers are the biLM's own layer states
    clf.eval()
    with torch.no_grad():
        states, mask = bilm.layer_states(char_ids)
        torch.testing.assert_close(clf(char_ids=char_ids).hidden_states, clf.mix(states))
    # not frozen: the biLM learns too
    tuned = ElmoForSequenceClassification(ElmoConfig.from_name("elmo-tiny", freeze_bilm=False)).train()
    tuned(char_ids=char_ids, labels=torch.tensor([0, 1])).loss.backward()
    assert tuned.char_cnn.embedding.weight.grad is not None and tuned.encoder.training
    # one label: regression
    regressor = ElmoForSequenceClassification(ElmoConfig.from_name("elmo-tiny"), num_labels=1).eval()
    out = regressor(char_ids=char_ids, labels=torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(out.logits.squeeze(-1), torch.tensor([0.5, -1.0])))


def _pooled_inputs(n: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    char_ids = torch.full((n, 8, 50), PAD_CHAR, dtype=torch.long)
    for i in range(n):
        length = int(rng.integers(2, 9))
        char_ids[i, :length] = words_to_chars(random_sentence(rng, length))[0]
    return char_ids


def test_classifier_standardises_the_pooled_features():
    torch.manual_seed(0)
    clf = ElmoForSequenceClassification(ElmoConfig.from_name("elmo-tiny", classifier_dropout=0.0), num_labels=3)
    seen = {}
    clf.classifier.register_forward_hook(lambda m, inputs, out: seen.update(x=inputs[0].detach()))
    clf.train()(char_ids=_pooled_inputs(16, 0))
    # what the linear layer reads: each feature with mean 0 and variance 1 over the batch
    torch.testing.assert_close(seen["x"].mean(0), torch.zeros(2 * P), atol=1e-5, rtol=0)
    # (up to BatchNorm's epsilon, which matters for the dimensions that hardly vary)
    torch.testing.assert_close(seen["x"].var(0, unbiased=False), torch.ones(2 * P), atol=0.05, rtol=0)
    # a training batch of one uses the running statistics instead of failing
    assert torch.isfinite(clf(char_ids=_pooled_inputs(1, 1), labels=torch.tensor([2])).loss)
    # evaluation reads the running statistics: one example's output does not depend on its batch
    clf.eval()
    batch = _pooled_inputs(4, 2)
    torch.testing.assert_close(clf(char_ids=batch).logits[:1], clf(char_ids=batch[:1]).logits)
    # off: the pooled mean goes straight to the classifier
    plain = ElmoForSequenceClassification(ElmoConfig.from_name("elmo-tiny", classifier_norm=False), num_labels=3)
    assert isinstance(plain.norm, torch.nn.Identity) and not list(clf.norm.parameters())


def test_bilm_objective_batch_end_to_end():
    rng = np.random.default_rng(8)
    words = ["<pad>", "<unk>", "<S>", "</S>"] + sorted({"".join(rng.choice(list("abcdefgh"), int(rng.integers(1, 9)))) for _ in range(400)})
    table = char_table(words, 50, "<S>", "</S>")
    vocab = Vocab(size=len(words), pad=0, unk=1, bos=2, eos=3, special_ids=frozenset(range(4)), char_table=table)
    documents = []
    for d in range(4):
        n = int(rng.integers(20, 60))
        tokens = rng.integers(4, len(words), n).astype(np.int64)
        starts = rng.random(n) < 0.1
        starts[0] = True
        documents.append(Document(tokens, np.ones(n, bool), starts, d))
    objective = BidirectionalLM(Corpus(documents), vocab, BidirectionalLM.Config(max_length=16))
    batch = pad_batch([objective.example(i, None) for i in range(min(8, len(objective)))], pad_id=vocab.pad)
    assert set(batch) == {"input_ids", "char_ids", "labels", "backward_labels", "attention_mask"}
    assert not bool(batch["attention_mask"].all())  # the batch has padding

    torch.manual_seed(8)
    model = ElmoBiLM(ElmoConfig.from_name("elmo-tiny", vocab_size=vocab.size, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(6):
        out = model(**batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(out.loss.item())
    assert abs(losses[0] - 2 * math.log(vocab.size)) < 0.1 * 2 * math.log(vocab.size)
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < losses[0] - 0.5
