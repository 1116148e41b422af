"""Tagging: words aligned to every architecture's sub-word tokens (first sub-token tagged), the
tagging heads' per-position logits and loss, and predictions read back to one tag per word."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lmforge.finetuning.features import FeatureError, collate, model_overrides, pad_id
from lmforge.finetuning.tagging.features import encode_tagged, word_tags
from lmforge.finetuning.tasks import TaggedSentence
from lmforge.models.registry import build_model
from lmforge.objectives.base import IGNORE_INDEX
from lmforge.tokenizer_kinds import ARCHITECTURE_TOKENIZER

ARCHITECTURES = sorted(ARCHITECTURE_TOKENIZER)
PRESET = {"bert": "bert-tiny-test", "ernie": "ernie-tiny-test", "albert": "albert-tiny", "gpt": "gpt-tiny",
          "transformer_xl": "txl-tiny", "xlnet": "xlnet-tiny", "elmo": "elmo-tiny", "bart": "bart-tiny", "t5": "t5-tiny",
          "switch": "switch-tiny"}
TAGS = {"O": 0, "B-PARAM": 1, "I-PARAM": 2}
SENTENCES = [
    TaggedSentence(("Return", "the", "*", "path", "*", "of", "(", "key", ",", "value", ")", "pairs", "."),
                   ("O", "O", "O", "B-PARAM", "O", "O", "O", "B-PARAM", "O", "B-PARAM", "O", "O", "O"), id="s1"),
    TaggedSentence(("If", "timeout_seconds", "is", "given", ",", "wait", "."),
                   ("O", "B-PARAM", "O", "O", "O", "O", "O"), id="s2"),
    TaggedSentence(("Unbelievably", "long", "words", "split"), ("B-PARAM", "I-PARAM", "O", "O"), id="s3"),
]


def tok_dir(corpus, arch):
    params, _ = corpus
    return Path(params.tokenizer.output) / ARCHITECTURE_TOKENIZER[arch]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_each_word_is_tagged_once_at_its_first_sub_token(corpus, arch):
    d = tok_dir(corpus, arch)
    encoded, words = encode_tagged(SENTENCES, arch, d, 64, TAGS, prefix="docstring params")
    for s, e, w in zip(SENTENCES, encoded, words):
        labelled = [int(x) for x in e["labels"] if x != IGNORE_INDEX]
        assert w == list(range(len(s.words)))  # every word has a first sub-token, in order
        assert labelled == [TAGS[t] for t in s.tags]
        assert len(e["labels"]) == len(e["input_ids"])
    # the model's tag at each first sub-token comes back to its word; the rest of a word is not read
    e, w, s = encoded[0], words[0], SENTENCES[0]
    guess = [TAGS["I-PARAM"]] * len(e["labels"])
    for pos, lab in enumerate(e["labels"]):
        if lab != IGNORE_INDEX:
            guess[pos] = int(lab)
    assert word_tags(guess, e["labels"].tolist(), w, len(s.words), list(TAGS)) == list(s.tags)


@pytest.mark.parametrize("arch", ["bert", "gpt", "t5", "elmo"])
def test_words_cut_by_max_length_are_predicted_outside(corpus, arch):
    d = tok_dir(corpus, arch)
    encoded, words = encode_tagged(SENTENCES[:1], arch, d, 8, TAGS, prefix="p")
    e, w, s = encoded[0], words[0], SENTENCES[0]
    assert len(e["input_ids"]) <= 8 and 0 < len(w) < len(s.words)
    ones = [TAGS["B-PARAM"]] * len(e["labels"])
    tags = word_tags(ones, e["labels"].tolist(), w, len(s.words), list(TAGS))
    assert tags[:len(w)] == ["B-PARAM"] * len(w) and tags[len(w):] == ["O"] * (len(s.words) - len(w))


def test_a_tag_set_without_outside_and_an_unknown_tag_are_refused(corpus):
    d = tok_dir(corpus, "bert")
    with pytest.raises(FeatureError, match="needs the tag 'O'"):
        encode_tagged(SENTENCES, "bert", d, 64, {"B-PARAM": 0, "I-PARAM": 1})
    with pytest.raises(FeatureError, match="I-PARAM"):
        encode_tagged(SENTENCES, "bert", d, 64, {"O": 0, "B-PARAM": 1})


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_has_a_tagging_head(corpus, arch):
    torch.manual_seed(0)
    d = tok_dir(corpus, arch)
    encoded, _ = encode_tagged(SENTENCES, arch, d, 64, TAGS, prefix="docstring params")
    model = build_model(PRESET[arch], head="token_classification", num_labels=len(TAGS), **model_overrides(arch, d))
    model.eval()
    batch = collate(encoded, pad_id(arch, d))
    with torch.no_grad():
        out = model(**batch)
    B, L = batch["labels"].shape
    assert out.logits.shape == (B, L, len(TAGS))
    # the loss is the cross entropy over the tagged positions only
    mask = batch["labels"] != IGNORE_INDEX
    expected = F.cross_entropy(out.logits[mask].float(), batch["labels"][mask])
    task_loss = out.aux.get("tagging_loss", out.loss)
    assert math.isfinite(float(out.loss)) and float(task_loss) == pytest.approx(float(expected), rel=1e-5)
    if arch == "switch":  # the router losses are added to the tagging loss, as to Switch's other heads
        routed = task_loss + out.aux["load_balancing_loss"] + out.aux["router_z_loss"]
        assert float(out.loss) == pytest.approx(float(routed), rel=1e-6) and float(out.loss) > float(task_loss)
    # a gradient reaches the backbone through the tagger
    model.train()
    model(**batch).loss.backward()
    assert model.token_classifier.weight.grad is not None
    reached = [n for n, p in model.named_parameters()
               if not n.startswith("token_classifier") and p.grad is not None and p.grad.abs().sum() > 0]
    assert len(reached) >= 2  # the network under the tagger learns too (ELMo: at least its scalar mix)


@pytest.mark.parametrize("preset, pooled", [("bert-tiny-test", "classifier"), ("gpt-tiny", "score"),
                                           ("bart-tiny", "head"), ("xlnet-tiny", "summary"), ("t5-tiny", "classifier")])
def test_the_tagging_head_is_the_sequence_classifiers_network_without_its_pooled_head(preset, pooled):
    seq = set(build_model(preset, head="classification", num_labels=3).state_dict())
    for head in ("token_classification", "span_extraction"):
        names = set(build_model(preset, head=head, num_labels=2 if head == "span_extraction" else 3).state_dict())
        assert names - seq == {"token_classifier.weight", "token_classifier.bias"}
        assert {n.split(".")[0] for n in seq - names} <= {pooled, "logits_proj"}  # only the pooled head is gone
