"""Each tokenizer kind: trained, loadable by transformers with its specials at the documented ids."""

import json

import numpy as np
import pytest
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from lmforge.chars import BOS_CHAR, BOW_CHAR, EOS_CHAR, EOW_CHAR, PAD_CHAR, encode_word
from lmforge.tokenizer_kinds import ARCHITECTURE_TOKENIZER, KINDS
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.train import _mark_internal, _unmark, train_kind

from .conftest import EXTRA, params_for, small_corpus, write_clean

EXPECTED_IDS = {
    "bpe": {"bos_token": ("<s>", 0), "pad_token": ("<pad>", 1), "eos_token": ("</s>", 2), "unk_token": ("<unk>", 3), "mask_token": ("<mask>", 4)},
    "wordpiece": {"pad_token": ("[PAD]", 0), "unk_token": ("[UNK]", 1), "cls_token": ("[CLS]", 2), "sep_token": ("[SEP]", 3), "mask_token": ("[MASK]", 4)},
    "unigram": {"pad_token": ("<pad>", 0), "eos_token": ("</s>", 1), "unk_token": ("<unk>", 2), "bos_token": ("<s>", 3),
                "cls_token": ("<cls>", 4), "sep_token": ("<sep>", 5), "mask_token": ("<mask>", 6)},
    "char": {"pad_token": ("<pad>", 0), "unk_token": ("<unk>", 1), "bos_token": ("<S>", 2), "eos_token": ("</S>", 3)},
}


@pytest.mark.parametrize("kind", KINDS)
def test_loads_in_transformers_with_specials_at_documented_ids(trained, kind):
    tmp, params, _ = trained
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp / "tokenizers" / kind))
    for attr, (token, token_id) in EXPECTED_IDS[kind].items():
        assert getattr(hf, attr) == token, attr
        assert hf.convert_tokens_to_ids(token) == token_id, attr
    text = EXTRA[0]
    assert hf(text, add_special_tokens=False)["input_ids"] == Tokenizer.from_file(str(tmp / "tokenizers" / kind / "tokenizer.json")).encode(text, add_special_tokens=False).ids


def test_t5_sentinels_count_down_from_the_top(trained):
    tmp, params, _ = trained
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp / "tokenizers" / "unigram"))
    size = len(hf)
    assert size == params.tokenizer.unigram.vocab_size
    for i in range(params.tokenizer.unigram.sentinels):
        assert hf.convert_tokens_to_ids(f"<extra_id_{i}>") == size - 1 - i
    assert "<extra_id_0>" in hf.all_special_tokens
    # sentinels and specials are atomic: never split, never produced by ordinary text
    ids = hf("a <extra_id_3> b", add_special_tokens=False)["input_ids"]
    assert size - 4 in ids


def test_wordpiece_adds_bert_specials_and_uses_continuation_prefix(trained):
    tmp, _, _ = trained
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp / "tokenizers" / "wordpiece"))
    ids = hf("Hello there", "Second part")["input_ids"]
    assert ids[0] == 2 and ids.count(3) == 2
    assert hf.tokenize("HELLO") == hf.tokenize("hello")  # lower-casing is on by default
    assert any(t.startswith("##") for t in hf.get_vocab())


def test_char_table_follows_the_bilm_scheme(trained):
    tmp, params, _ = trained
    d = tmp / "tokenizers" / "char"
    table = np.load(d / "char_table.npy")
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    assert table.shape == (tok.get_vocab_size(), 50)
    the = tok.token_to_id("the")
    assert list(table[the][:5]) == [BOW_CHAR, ord("t"), ord("h"), ord("e"), EOW_CHAR]
    assert all(table[the][5:] == PAD_CHAR)
    assert list(table[tok.token_to_id("<S>")][:3]) == [BOW_CHAR, BOS_CHAR, EOW_CHAR]
    assert list(table[tok.token_to_id("</S>")][:3]) == [BOW_CHAR, EOS_CHAR, EOW_CHAR]
    # multi-byte characters are their UTF-8 bytes; long words are cut to fit bow/eow
    assert list(encode_word("é", 6)) == [BOW_CHAR, 0xC3, 0xA9, EOW_CHAR, PAD_CHAR, PAD_CHAR]
    long = encode_word("x" * 100, 50)
    assert long[0] == BOW_CHAR and long[-1] == EOW_CHAR and (long[1:-1] == ord("x")).all()
    assert json.loads((d / "char_config.json").read_text())["max_characters"] == 50


def test_metrics(trained):
    tmp, params, metrics = trained
    for kind in KINDS:
        m = json.loads((tmp / "tokenizers" / kind / "metrics.json").read_text())
        assert m == metrics[kind]
        assert m["measured_on"] == "validation" and m["documents"] > 0
        assert m["vocab_size"] > 0 and 0.5 < m["tokens_per_word"] < 10 and m["bytes_per_token"] > 1
        assert 0 <= m["unknown_rate"] < 0.2
    assert metrics["bpe"]["round_trip_promised"] and metrics["bpe"]["round_trip_rate"] == 1.0
    assert metrics["bpe"]["unknown_rate"] == 0.0  # bytes cover everything
    assert metrics["char"]["architectures"] == ["elmo"]
    assert set(metrics["unigram"]["architectures"]) == {"t5", "switch", "albert", "xlnet"}



@pytest.mark.parametrize("kind", KINDS)
def test_bytes_per_token_is_a_count_on_the_validation_documents(trained, kind):
    """metrics.json's counts, recounted: the validation documents of the clean corpus (none of
    the train or test split), their UTF-8 bytes over the saved tokenizer's tokens without specials."""
    import pyarrow.parquet as pq

    from lmforge.splits import split_of

    tmp, params, metrics = trained
    table = pq.read_table(tmp / "clean" / "shard-00000.parquet").to_pylist()
    texts = [r["text"] for r in table if split_of(r["id"], params.split) == "validation"]
    tok = Tokenizer.from_file(str(tmp / "tokenizers" / kind / "tokenizer.json"))
    n_tokens = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    m = metrics[kind]
    assert 0 < len(texts) < len(table) and m["documents"] == len(texts)
    assert m["tokens"] == n_tokens
    assert m["bytes_per_token"] == round(n_bytes / n_tokens, 4)
    assert m["tokens_per_word"] == round(n_tokens / sum(len(t.split()) for t in texts), 4)

def test_fertility_and_token_length_histograms_are_drawn_and_shown(trained):
    from types import SimpleNamespace

    from lmforge.stages import KINDS as STAGE_KINDS
    from lmforge.stages.kind import Image

    tmp, params, metrics = trained
    for kind in KINDS:
        m, out = metrics[kind], tmp / "tokenizers" / kind
        f = m["fertility"]
        assert f["documents"] == m["documents"] and sum(f["counts"]) == f["words"] > 0  # every held-out word, once
        # words are whitespace-separated, as tokens_per_word counts them; a word is at least one token
        assert f["counts"][0] == 0 and f["counts"][1] > f["words"] / 2
        tok = Tokenizer.from_file(str(out / "tokenizer.json"))
        lengths = m["vocab_token_lengths"]
        assert sum(lengths["counts"]) == tok.get_vocab_size() - len(tok.get_added_tokens_decoder())
        for name in ("fertility", "token_lengths"):
            assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", (kind, name)
        shown = STAGE_KINDS["tokenizer"].metadata(SimpleNamespace(key={"kind": kind}), params, out)
        assert isinstance(shown["fertility"], Image) and isinstance(shown["token_lengths"], Image)
    assert metrics["bpe"]["vocab_token_lengths"]["unit"] == "bytes"


def test_fertility_counts_the_tokens_ending_in_each_word():
    from types import SimpleNamespace

    from lmforge.tokenization.train import FERTILITY_MAX, fertility_histogram

    text = "ab cde  f"  # words: ab (0-2), cde (3-6), f (8-9)
    # "a" "b" | " cde" (ends in cde) | " " (whitespace alone: no word) | " f"
    encoding = SimpleNamespace(offsets=[(0, 1), (1, 2), (2, 6), (6, 7), (7, 9)])
    h = fertility_histogram([text], [encoding])
    assert h == {"documents": 1, "words": 3, "counts": [0, 2, 1] + [0] * (FERTILITY_MAX - 2)}
    long = SimpleNamespace(offsets=[(i, i + 1) for i in range(12)])
    assert fertility_histogram(["x" * 12], [long])["counts"][FERTILITY_MAX] == 1  # the last bin holds the rest


def test_byte_level_bpe_round_trips_any_text(trained):
    tmp, _, _ = trained
    tok = Tokenizer.from_file(str(tmp / "tokenizers" / "bpe" / "tokenizer.json"))
    for text in ["  leading spaces\n\n\tand tabs", "Ünïcödé ½ 日本語 🤗 \u200b zero-width", "<s> looks special but is text"]:
        assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


@pytest.mark.parametrize("kind", KINDS)
def test_training_is_deterministic(tmp_path, kind):
    texts = small_corpus(200, seed=3)
    params = params_for(tmp_path)
    a = train_kind(kind, lambda: iter(texts), params.tokenizer).to_str()
    b = train_kind(kind, lambda: iter(texts), params.tokenizer).to_str()
    assert a == b


def test_internal_character_marking_is_reversible():
    for word in ["hello", "naïve", "日本語", "a🤗b", "x"]:
        marked = _mark_internal(word)
        assert marked[0] == word[0] and _unmark(marked) == word
        assert all(ord(c) >= 0xF0000 for c in marked[1:])


def test_every_architecture_has_a_declared_kind():
    assert set(ARCHITECTURE_TOKENIZER.values()) <= set(KINDS)
    assert set(ARCHITECTURE_TOKENIZER) == {"gpt", "bart", "transformer_xl", "bert", "ernie", "t5", "switch", "albert", "xlnet", "elmo"}


def test_up_to_date_and_missing_corpus(tmp_path):
    from lmforge.corpus.document import CorpusError

    params = params_for(tmp_path)
    with pytest.raises(CorpusError, match="run `lmforge clean` first"):
        run_tokenizer(params, ["bpe"], log=lambda m: None)
    write_clean(tmp_path / "clean", small_corpus(100))
    logs = []
    run_tokenizer(params, ["bpe"], log=logs.append)
    run_tokenizer(params, ["bpe"], log=logs.append)
    assert logs[-1] == "tokenizer bpe: up to date"
