"""The token store: offsets, word and sentence starts on hand-checked text, splits, manifest checks."""

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from lmforge.config import SplitConfig
from lmforge.splits import split_of
from lmforge.tokenizer_kinds import KINDS
from lmforge.tokenization.store import SENTENCE_START, WORD_START, StoreError, TokenStore, token_dtype, token_flags
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.tokens_stage import run_tokens

from .conftest import params_for, small_corpus, write_clean

HAND = "Hello world. The cat's toy is red! Another line is here.\nSecond paragraph starts now."


@pytest.fixture(scope="module")
def stores(trained):
    tmp, params, _ = trained
    for kind in KINDS:
        run_tokens(params, kind, log=lambda m: None)
    return tmp, params


def flagged(kind, tmp, text):
    tok = Tokenizer.from_file(str(tmp / "tokenizers" / kind / "tokenizer.json"))
    enc = tok.encode(text, add_special_tokens=False)
    flags = token_flags(enc, text)
    return enc, flags


@pytest.mark.parametrize("kind", KINDS)
def test_sentence_starts_on_hand_checked_text(stores, kind):
    tmp, _ = stores
    enc, flags = flagged(kind, tmp, HAND)
    starts = [HAND[enc.offsets[i][0] : enc.offsets[i][1]].strip() for i in np.flatnonzero(flags & SENTENCE_START)]
    # the text of the token that opens each sentence: the sentence's first word (or its start)
    firsts = ["Hello", "The", "Another", "Second"]
    assert len(starts) == 4
    for got, want in zip(starts, firsts):
        assert got and want.lower().startswith(got.lower()), (got, want)
    assert (flags[flags & SENTENCE_START > 0] & WORD_START).all()  # a sentence starts at a word start


@pytest.mark.parametrize("kind", KINDS)
def test_word_starts_follow_the_pre_tokenizer_words(stores, kind):
    tmp, _ = stores
    enc, flags = flagged(kind, tmp, HAND)
    n_words = len({w for w in enc.word_ids if w is not None})
    assert int((flags & WORD_START > 0).sum()) == n_words
    if kind == "wordpiece":  # consistent with, but not derived from, the "##" spelling
        continuation = np.array([t.startswith("##") for t in enc.tokens])
        assert ((flags & WORD_START) == 0).tolist() == continuation.tolist()
    if kind == "char":  # word-level: every token is a word
        assert (flags & WORD_START).all()
    if kind == "bpe":  # " world" is one word; "cat's" is cat + 's in GPT-2 pre-tokenisation
        bounds = [enc.offsets[i][0] for i in np.flatnonzero(flags & WORD_START)] + [len(HAND)]
        words = [HAND[a:b] for a, b in zip(bounds, bounds[1:])]
        assert words[:8] == ["Hello", " world", ".", " The", " cat", "'s", " toy", " is"]


@pytest.mark.parametrize("kind", KINDS)
def test_store_matches_the_tokenizer_and_the_corpus(stores, kind):
    tmp, params = stores
    store = TokenStore(tmp / "tokens" / kind, tokenizer=tmp / "tokenizers" / kind)
    store.verify(full=True)
    tok = Tokenizer.from_file(str(tmp / "tokenizers" / kind / "tokenizer.json"))
    corpus = dict(zip([f"doc{i}" for i in range(len(small_corpus()))], small_corpus()))
    total_docs = 0
    for split in ("train", "validation", "test"):
        arrays = store.split(split)
        ids = arrays.doc_ids()
        assert len(ids) == arrays.documents == store.manifest["splits"][split]["documents"]
        assert np.all(np.diff(arrays.doc_offsets) >= 0) and arrays.doc_offsets[-1] == len(arrays.tokens) == len(arrays.flags)
        assert all(split_of(i, params.split) == split for i in ids)
        for d in range(0, len(ids), 37):
            assert arrays.document(d).tolist() == tok.encode(corpus[ids[d]], add_special_tokens=False).ids
            first = arrays.flags[arrays.doc_offsets[d]]
            assert first & WORD_START and first & SENTENCE_START
        total_docs += len(ids)
    assert total_docs == len(corpus)
    assert store.manifest["dtype"] == "uint16" and arrays.tokens.dtype == np.uint16
    assert "tokens" in store.summary() and "validation" in store.summary()


def test_dtype_widens_for_large_vocabularies():
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32


def test_splits_are_stable_when_documents_are_added(tmp_path, capsys):
    cfg = SplitConfig(validation=0.1, test=0.1)
    ids = [f"doc{i}" for i in range(5000)]
    splits = {i: split_of(i, cfg) for i in ids}
    fractions = {s: sum(v == s for v in splits.values()) / len(ids) for s in ("train", "validation", "test")}
    assert abs(fractions["validation"] - 0.1) < 0.02 and abs(fractions["test"] - 0.1) < 0.02
    # through the store: build, add documents, build again; old documents stay where they were
    texts = small_corpus(120)
    params = params_for(tmp_path)
    write_clean(tmp_path / "clean", texts)
    run_tokenizer(params, ["bpe"], log=lambda m: None)
    stats = json.loads((tmp_path / "clean" / "stats.json").read_text())
    (tmp_path / "clean" / "stats.json").write_text(json.dumps({**stats, "documents_out": len(texts)}))
    capsys.readouterr()
    run_tokens(params, "bpe", log=lambda m: None)
    # off a terminal, the closing progress line: every shard of the clean corpus encoded
    n_shards = len(list((tmp_path / "clean").glob("shard-*.parquet")))
    assert f"token store bpe: {n_shards}/{n_shards} units (" in capsys.readouterr().err
    before = {s: set(TokenStore(tmp_path / "tokens" / "bpe").split(s).doc_ids()) for s in ("train", "validation", "test")}
    more = texts + small_corpus(80, seed=9)
    write_clean(tmp_path / "clean", more)
    run_tokens(params, "bpe", log=lambda m: None)
    after = {s: set(TokenStore(tmp_path / "tokens" / "bpe").split(s).doc_ids()) for s in ("train", "validation", "test")}
    for s in before:
        assert before[s] <= after[s]
    assert sum(len(v) for v in after.values()) == len(more)


def test_mismatched_tokenizer_is_caught(stores):
    tmp, _ = stores
    with pytest.raises(StoreError, match="built with a different tokenizer"):
        TokenStore(tmp / "tokens" / "bpe", tokenizer=tmp / "tokenizers" / "unigram")


def test_truncated_and_corrupt_arrays_are_caught(stores, tmp_path):
    import shutil

    tmp, _ = stores
    copy = tmp_path / "bpe"
    shutil.copytree(tmp / "tokens" / "bpe", copy)
    tokens = copy / "train" / "tokens.bin"
    data = tokens.read_bytes()
    tokens.write_bytes(data[:-10])
    with pytest.raises(StoreError, match="truncated or modified"):
        TokenStore(copy).split("train")
    tokens.write_bytes(data[:-2] + bytes([data[-2] ^ 1, data[-1]]))
    TokenStore(copy).split("train")  # same size: the quick check passes...
    with pytest.raises(StoreError, match="checksum differs"):
        TokenStore(copy).verify(full=True)  # ...the full one does not
    (copy / "manifest.json").unlink()
    with pytest.raises(StoreError, match="not a token store"):
        TokenStore(copy)


def test_rebuild_is_skipped_when_up_to_date_and_redone_when_tokenizer_changes(tmp_path):
    params = params_for(tmp_path)
    write_clean(tmp_path / "clean", small_corpus(60))
    run_tokenizer(params, ["char"], log=lambda m: None)
    logs = []
    run_tokens(params, "char", log=logs.append)
    run_tokens(params, "char", log=logs.append)
    assert logs[-1] == "token store char: up to date"
    params2 = params_for(tmp_path, char={"word_vocab_size": 100})
    run_tokenizer(params2, ["char"], log=lambda m: None)
    run_tokens(params2, "char", log=logs.append)
    assert "up to date" not in logs[-1]
    assert TokenStore(tmp_path / "tokens" / "char").manifest["vocab_size"] == 100


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    params = params_for(tmp_path)
    write_clean(tmp_path / "clean", small_corpus(10))
    with pytest.raises(StoreError, match="no trained wordpiece tokenizer"):
        run_tokens(params, "wordpiece", log=lambda m: None)
