"""Model inputs for every architecture, checked by running each tiny model's head on a batch."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lmforge.finetuning.features import (
    TEXT_TO_TEXT, FeatureError, collate, encode_examples, encode_split, fit, label_token_ids, model_overrides, pad_id,
    text_to_text,
)
from lmforge.finetuning.tasks import DEFAULT_TASK, Example, Task, load_task
from lmforge.models.registry import build_model
from lmforge.objectives.base import IGNORE_INDEX, Vocab
from lmforge.chars import BOS_CHAR, EOS_CHAR, encode_word, marker
from lmforge.tokenizer_kinds import ARCHITECTURE_TOKENIZER

ARCHITECTURES = sorted(ARCHITECTURE_TOKENIZER)
PRESET = {"bert": "bert-tiny-test", "ernie": "ernie-tiny-test", "albert": "albert-tiny", "gpt": "gpt-tiny",
          "transformer_xl": "txl-tiny", "xlnet": "xlnet-tiny", "elmo": "elmo-tiny", "bart": "bart-tiny", "t5": "t5-tiny",
          "switch": "switch-tiny"}
MAX_LENGTH = 48


@pytest.fixture(scope="module")
def task(corpus):
    params, _ = corpus
    return load_task(DEFAULT_TASK, params, max_train=16, max_eval=8)


@pytest.fixture(scope="module")
def pair_task():
    ex = [Example("The cat sat on the mat and looked around the room.", "A cat is sitting.", "yes"),
          Example("Nobody came to the party.", "The party was crowded with people from the whole town.", "no"),
          Example("It rained all day.", "The ground was wet.", "yes")]
    return Task("toy_pairs", "toy", ["no", "yes"], True, {"train": ex, "validation": ex, "test": ex}, "toy pairs")


def tok_dir(corpus, arch):
    params, _ = corpus
    return Path(params.tokenizer.output) / ARCHITECTURE_TOKENIZER[arch]


def vocab(corpus, arch):
    return Vocab.from_tokenizer(tok_dir(corpus, arch))


def run_head(corpus, arch, examples, num_labels, mode=None):
    """Build the tiny preset with the tokenizer's sizes and ids, run it on the collated batch."""
    torch.manual_seed(0)
    d = tok_dir(corpus, arch)
    head = "seq2seq" if (mode or ("text_to_text" if text_to_text(arch) else "classification")) == "text_to_text" \
        else "classification"
    model = build_model(PRESET[arch], head=head, num_labels=num_labels if head == "classification" else None,
                        **model_overrides(arch, d))
    model.eval()
    batch = collate(examples, pad_id(arch, d))
    with torch.no_grad():
        out = model(**batch)
    return batch, out


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_runs_its_fine_tuning_head(corpus, task, arch):
    examples = encode_split(task, "train", arch, tok_dir(corpus, arch), MAX_LENGTH)
    assert len(examples) == len(task.splits["train"])
    assert all(len(e["input_ids"]) <= MAX_LENGTH for e in examples)
    batch, out = run_head(corpus, arch, examples, num_labels=len(task.label_names))
    B = len(examples)
    assert out.loss is not None and math.isfinite(float(out.loss))
    if text_to_text(arch):
        assert batch["labels"].dim() == 2 and "decoder_input_ids" not in batch  # the model shifts labels itself
        assert out.logits.shape == (B, batch["labels"].shape[1], model_overrides(arch, tok_dir(corpus, arch))["vocab_size"])
    else:
        assert batch["labels"].shape == (B,) and batch["labels"].dtype == torch.int64
        assert out.logits.shape == (B, len(task.label_names))
        assert batch["labels"].tolist() == [task.label_names.index(e.label) for e in task.splits["train"]]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_pairs_fit_every_architecture(corpus, pair_task, arch):
    examples = encode_split(pair_task, "test", arch, tok_dir(corpus, arch), MAX_LENGTH)
    _, out = run_head(corpus, arch, examples, num_labels=2)
    assert math.isfinite(float(out.loss))


@pytest.mark.parametrize("arch", sorted(TEXT_TO_TEXT))
def test_seq2seq_architectures_also_take_the_classification_head(corpus, task, arch):
    examples = encode_split(task, "validation", arch, tok_dir(corpus, arch), MAX_LENGTH, mode="classification")
    assert all(e["labels"].ndim == 0 for e in examples)
    _, out = run_head(corpus, arch, examples, num_labels=3, mode="classification")
    assert out.logits.shape == (len(examples), 3) and math.isfinite(float(out.loss))


# ----------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("arch", ["bert", "ernie", "albert"])
def test_bert_layout(corpus, pair_task, arch):
    v = vocab(corpus, arch)
    single = encode_examples([Example("hello there world", None, "yes")], arch, tok_dir(corpus, arch), 32, {"no": 0, "yes": 1})[0]
    ids = single["input_ids"].tolist()
    assert ids[0] == v.cls and ids[-1] == v.sep and ids.count(v.sep) == 1
    assert single["token_type_ids"].tolist() == [0] * len(ids) and int(single["labels"]) == 1
    e = encode_split(pair_task, "test", arch, tok_dir(corpus, arch), 64)[0]
    ids, types = e["input_ids"].tolist(), e["token_type_ids"].tolist()
    first_sep = ids.index(v.sep)
    assert ids[0] == v.cls and ids[-1] == v.sep and ids.count(v.sep) == 2
    assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)


def test_gpt_layout_and_the_position_its_head_reads(corpus, pair_task):
    v = vocab(corpus, "gpt")
    assert v.sep is None  # the bpe kind has no sep: the delimiter is eos
    examples = encode_split(pair_task, "test", "gpt", tok_dir(corpus, "gpt"), 64)
    for e in examples:
        ids = e["input_ids"].tolist()
        assert ids[0] == v.bos and ids[-1] == v.eos and ids.count(v.eos) == 2 and v.pad not in ids
    batch = collate(examples, pad_id("gpt", tok_dir(corpus, "gpt")))
    assert (batch["input_ids"] == v.pad).any()  # rows of different lengths: right padding
    last = (torch.arange(batch["input_ids"].shape[1]) * batch["attention_mask"]).argmax(-1)
    assert batch["input_ids"][torch.arange(len(examples)), last].tolist() == [v.eos] * len(examples)


def test_xlnet_layout_reads_cls_under_right_padding(corpus, pair_task):
    v = vocab(corpus, "xlnet")
    examples = encode_split(pair_task, "test", "xlnet", tok_dir(corpus, "xlnet"), 64)
    for e in examples:
        ids, types = e["input_ids"].tolist(), e["token_type_ids"].tolist()
        first_sep = ids.index(v.sep)
        assert ids[-1] == v.cls and ids[-2] == v.sep and ids.count(v.sep) == 2
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 2) + [2]
    batch = collate(examples, v.pad)
    last = (torch.arange(batch["input_ids"].shape[1]) * batch["attention_mask"]).argmax(-1)
    assert batch["input_ids"][torch.arange(len(examples)), last].tolist() == [v.cls] * len(examples)


def test_transformer_xl_layout(corpus, pair_task):
    v = vocab(corpus, "transformer_xl")
    ids = encode_split(pair_task, "test", "transformer_xl", tok_dir(corpus, "transformer_xl"), 64)[0]["input_ids"].tolist()
    assert ids[-1] == v.eos and ids.count(v.eos) == 2 and v.bos not in ids


def test_elmo_layout_keeps_characters_of_unknown_words(corpus, pair_task):
    v = vocab(corpus, "elmo")
    e = encode_examples([Example("the Zyxwvutsr", "of.", "yes")], "elmo", tok_dir(corpus, "elmo"), 16, {"no": 0, "yes": 1})[0]
    ids, chars = e["input_ids"].tolist(), e["char_ids"]
    assert ids == [v.bos, ids[1], v.unk, v.eos, v.bos, ids[5], ids[6], v.eos] and ids[1] != v.unk
    width = v.char_table.shape[1]
    assert chars.shape == (8, width) and chars.dtype == np.int64
    assert (chars[0] == marker(BOS_CHAR, width)).all() and (chars[3] == marker(EOS_CHAR, width)).all()
    assert (chars[2] == encode_word("Zyxwvutsr", width)).all()  # its own bytes, not <unk>'s
    assert (chars[1] == v.char_table[ids[1]]).all()  # an in-vocabulary word: the table's row
    batch = collate(encode_split(pair_task, "test", "elmo", tok_dir(corpus, "elmo"), 64), v.pad)
    assert batch["char_ids"].shape[:2] == batch["attention_mask"].shape


@pytest.mark.parametrize("arch", sorted(TEXT_TO_TEXT))
def test_text_to_text_layout_and_label_targets(corpus, task, pair_task, arch):
    from tokenizers import Tokenizer

    d = tok_dir(corpus, arch)
    v = vocab(corpus, arch)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    targets = label_token_ids(task, arch, d)
    assert set(targets) == set(task.label_names)
    assert len({tuple(t) for t in targets.values()}) == 3
    for name, ids in targets.items():
        assert ids[-1] == v.eos and (ids[0] == v.bos) == (arch == "bart")
        body = ids[1:-1] if arch == "bart" else ids[:-1]
        assert tok.decode(body).strip() == name
    examples = encode_split(task, "test", arch, d, MAX_LENGTH)
    for ex, e in zip(task.splits["test"], examples):
        assert e["labels"].tolist() == targets[ex.label]
        ids = e["input_ids"].tolist()
        assert ids[-1] == v.eos and (ids[0] == v.bos) == (arch == "bart")
        text = tok.decode(ids, skip_special_tokens=True)
        assert text.startswith("docstring kind:")
    pair = encode_split(pair_task, "test", arch, d, 128)[0]["input_ids"].tolist()
    decoded = tok.decode(pair, skip_special_tokens=True)
    assert decoded.startswith("toy pairs:") and "sentence2:" in decoded and decoded.rstrip().endswith("sitting.")
    batch = collate(examples, v.pad)
    assert (batch["labels"] == IGNORE_INDEX).sum() >= 0 and batch["labels"].dtype == torch.int64


# ----------------------------------------------------------------------------- truncation and errors


def test_fit_is_longest_first():
    assert fit(list(range(10)), None, 4) == ([0, 1, 2, 3], None)
    assert fit(list(range(10)), list(range(3)), 8) == ([0, 1, 2, 3, 4], [0, 1, 2])
    assert fit(list(range(4)), list(range(4)), 6) == ([0, 1, 2], [0, 1, 2])
    assert fit([1, 2], [3], 5) == ([1, 2], [3])


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_truncation_keeps_special_tokens(corpus, arch):
    long = " ".join(["documentation of the function that returns values"] * 20)
    ex = [Example(long, long + " again", "no")]
    [e] = encode_examples(ex, arch, tok_dir(corpus, arch), 24, {"no": 0, "yes": 1}, prefix="p", label_names=["no", "yes"])
    assert len(e["input_ids"]) == 24
    v = vocab(corpus, arch)
    last = {"bert": v.sep, "ernie": v.sep, "albert": v.sep, "gpt": v.eos, "transformer_xl": v.eos, "xlnet": v.cls,
            "elmo": v.eos, "t5": v.eos, "switch": v.eos, "bart": v.eos}[arch]
    assert e["input_ids"][-1] == last


def test_errors(corpus, task):
    d = tok_dir(corpus, "bert")
    with pytest.raises(FeatureError, match="unknown architecture"):
        encode_split(task, "train", "roberta", d, 32)
    with pytest.raises(FeatureError, match="no text-to-text head"):
        encode_split(task, "train", "bert", d, 32, mode="text_to_text")
    with pytest.raises(FeatureError, match="leaves no room"):
        encode_examples([Example("a b", "c d", "x")], "bert", d, 3, {"x": 0})
    with pytest.raises(FeatureError, match="not in"):
        encode_split(task, "train", "bert", d, 32, label_ids={"module": 0})
    with pytest.raises(FeatureError, match="no split"):
        encode_split(task, "dev", "bert", d, 32)
    with pytest.raises(FeatureError, match="has no cls"):
        encode_split(task, "train", "bert", tok_dir(corpus, "gpt"), 32)  # a bpe tokenizer for BERT
    with pytest.raises(FeatureError, match="not a text-to-text"):
        label_token_ids(task, "bert", d)


def test_tokenizer_root_or_kind_directory(corpus, task):
    params, _ = corpus
    root = Path(params.tokenizer.output)
    a = encode_split(task, "test", "albert", root, 32)
    b = encode_split(task, "test", "albert", root / "unigram", 32)
    assert all((x["input_ids"] == y["input_ids"]).all() for x, y in zip(a, b))
    with pytest.raises(FeatureError, match="no tokenizer.json"):
        encode_split(task, "test", "albert", root / "missing", 32)
