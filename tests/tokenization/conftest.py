import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.artifacts import sha256_file
from lmforge.config import Params
from lmforge.corpus.document import SCHEMA
from lmforge.testing.documents import page

EXTRA = [
    "Hello world. The cat's toy is red! Another line is here.\nSecond paragraph starts now.",
    "Unicode: naïve café, ½ cup, 日本語 text, and an emoji 🤗 appear here. Done.",
]


def write_clean(directory, texts, ids=None):
    """A clean-stage output (shards + stats.json) written directly."""
    directory.mkdir(parents=True, exist_ok=True)
    ids = ids or [f"doc{i}" for i in range(len(texts))]
    n = len(texts)
    table = pa.Table.from_pydict(
        {"id": ids, "text": texts, "url": [None] * n, "timestamp": [None] * n, "source": ["test"] * n, "metadata": ["{}"] * n},
        schema=SCHEMA,
    )
    shard = directory / "shard-00000.parquet"
    pq.write_table(table, shard)
    (directory / "stats.json").write_text(json.dumps({"shards": {shard.name: sha256_file(shard)}}))
    return directory


def small_corpus(n=400, seed=0):
    rng = random.Random(seed)
    return [page(rng, lines=rng.randint(2, 5)) for _ in range(n)] + EXTRA


def params_for(tmp_path, **tokenizer):
    tok = {"bpe": {"vocab_size": 600}, "wordpiece": {"vocab_size": 500}, "unigram": {"vocab_size": 250, "sentinels": 10},
           "char": {"word_vocab_size": 300}}
    tok.update(tokenizer)
    return Params.model_validate({
        "clean": {"output": str(tmp_path / "clean")},
        "split": {"validation": 0.1, "test": 0.1},
        "tokenizer": {"output": str(tmp_path / "tokenizers"), **tok},
        "tokenize": {"output": str(tmp_path / "tokens"), "batch_size": 64},
    })


def tokenized_project(tmp_path, documents: int, dataset: dict) -> Params:
    """A project of ``documents`` generated pages with tokenizers of every kind and their token
    stores built (the unigram vocabulary small), ``dataset`` its dataset section."""
    from lmforge.tokenization.tokenizer_stage import run_tokenizer
    from lmforge.tokenization.tokens_stage import run_tokens
    from lmforge.tokenizer_kinds import KINDS

    write_clean(tmp_path / "clean", small_corpus(documents))
    base = params_for(tmp_path, unigram={"vocab_size": 300, "sentinels": 20})
    params = Params.model_validate({**base.model_dump(mode="json"), "dataset": {"output": str(tmp_path / "datasets"),
                                                                                 **dataset}})
    run_tokenizer(params, log=lambda m: None)
    for kind in KINDS:
        run_tokens(params, kind, log=lambda m: None)
    return params


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Tokenizers of every kind trained on a small generated corpus."""
    from lmforge.tokenization.tokenizer_stage import run_tokenizer

    tmp = tmp_path_factory.mktemp("tok")
    write_clean(tmp / "clean", small_corpus())
    params = params_for(tmp)
    metrics = run_tokenizer(params, log=lambda m: None)
    return tmp, params, metrics
