"""``lmforge embed``: token vectors equal the converted model's hidden states in transformers,
words and texts pooled as documented, ELMo's layer mixes, the files, and the errors."""

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers

from lmforge.inference.embed import embed, write
from lmforge.inference.export import export_model
from lmforge.inference.loading import InferenceError, load

from .conftest import write_model

TEXTS = ["Return the value of the parser.", "Close the file and flush its buffers before exit."]


@pytest.mark.parametrize("arch", ["bert", "albert", "ernie", "gpt", "xlnet", "bart", "t5"])
def test_token_vectors_equal_transformers_hidden_states(models, arch, tmp_path):
    loaded = load(models[arch])
    out = export_model(loaded, tmp_path / "hf")
    hf = transformers.AutoModel.from_pretrained(str(out)).eval()
    got = embed(loaded, TEXTS, level="token")
    for ids, vectors in zip(got.ids, got.vectors):
        x = torch.tensor([ids])
        with torch.no_grad():
            h = (hf.get_encoder()(input_ids=x) if arch in ("bart", "t5") else hf(input_ids=x)).last_hidden_state[0]
        np.testing.assert_allclose(vectors, h.numpy(), atol=1e-5)


def test_words_and_texts_are_pooled_as_documented(models):
    loaded = load(models["bert"])
    tokens = embed(loaded, TEXTS, level="token")
    words = embed(loaded, TEXTS, level="word")
    word_ids = loaded.tokenizer.tokenizer.encode(TEXTS[1], add_special_tokens=False).word_ids
    assert len(words.vectors[1]) == max(word_ids) + 1
    w = word_ids[3]
    members = [1 + k for k, i in enumerate(word_ids) if i == w]  # after [CLS]
    np.testing.assert_allclose(words.vectors[1][w], tokens.vectors[1][members].mean(0), atol=1e-6)
    mean = embed(loaded, TEXTS, level="text", pooling="mean", batch_size=1)
    np.testing.assert_allclose(mean.vectors[1][0], tokens.vectors[1].mean(0), atol=1e-6)
    cls = embed(loaded, TEXTS, pooling="cls")
    np.testing.assert_allclose(cls.vectors[0][0], tokens.vectors[0][0], atol=1e-6)
    last = embed(loaded, TEXTS, pooling="last")
    np.testing.assert_allclose(last.vectors[1][0], tokens.vectors[1][-1], atol=1e-6)
    # batching and padding do not change a text's vectors
    np.testing.assert_allclose(embed(loaded, TEXTS, batch_size=2).vectors[0], embed(loaded, TEXTS[:1]).vectors[0], atol=1e-5)


def test_elmo_mixes(models, corpus, tmp_path):
    loaded = load(models["elmo"])
    top = embed(loaded, TEXTS, level="token", mix="top")
    uniform = embed(loaded, TEXTS, level="token", mix="uniform")
    assert top.vectors[0].shape == uniform.vectors[0].shape and not np.allclose(top.vectors[0], uniform.vectors[0])
    with pytest.raises(InferenceError, match="learned mix"):
        embed(loaded, TEXTS, mix="learned")
    params, _ = corpus
    clf = load(write_model(params, "elmo", tmp_path / "clf", head="classification", num_labels=2))
    with torch.no_grad():  # equal scalars: the mix is gamma x the layers' mean
        clf.model.mix.scalars.zero_()
        clf.model.mix.gamma.fill_(2.0)
    learned = embed(clf, TEXTS, level="token", mix="learned")
    np.testing.assert_allclose(learned.vectors[0], 2.0 * embed(clf, TEXTS, level="token", mix="uniform").vectors[0],
                               atol=1e-5)
    words = embed(loaded, TEXTS, level="word")
    assert len(words.vectors[0]) == len(top.vectors[0]) - 2  # ELMo's tokens are words, between <S> and </S>
    np.testing.assert_allclose(words.vectors[0], top.vectors[0][1:-1], atol=1e-6)


def test_files(models, tmp_path):
    loaded = load(models["gpt"])
    texts = embed(loaded, TEXTS)
    write(texts, TEXTS, tmp_path / "t.npy", "text")
    assert np.load(tmp_path / "t.npy").shape == (2, 128)
    tokens = embed(loaded, TEXTS, level="token")
    write(tokens, TEXTS, tmp_path / "t.parquet", "token")
    table = pq.read_table(tmp_path / "t.parquet").to_pydict()
    assert len(table["vector"]) == sum(len(v) for v in tokens.vectors)
    assert table["input_ids"][0] == tokens.ids[0] and table["text_index"][-1] == 1
    with pytest.raises(InferenceError, match="parquet"):
        write(tokens, TEXTS, tmp_path / "t.npy", "token")


def test_errors(models):
    with pytest.raises(InferenceError, match="no \\[CLS\\]"):
        embed(load(models["gpt"]), TEXTS, pooling="cls")
    with pytest.raises(InferenceError, match="empty"):
        embed(load(models["bert"]), ["ok text", " "])
    with pytest.raises(InferenceError, match="ELMo"):
        embed(load(models["bert"]), TEXTS, mix="uniform")
