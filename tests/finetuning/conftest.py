"""A small synthetic docstring corpus (the clean stage's Parquet schema) and tokenizers trained on it."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.config import Params
from lmforge.corpus.document import SCHEMA
from lmforge.testing.documents import sentence

KINDS_OF = ("module", "class", "function")
SHORT_LINE = "Too short to count."  # 4 words: below min_words


def docstring_documents(n=240, seed=0):
    """(id, text, metadata) rows: ids shaped like the stdlib corpus's, labels cycling through
    module / class / function, a short line in every document, and two unlabelled documents."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        kind = KINDS_OF[i % 3]
        doc_id = {"module": f"stdlib:mod{i}", "class": f"stdlib:mod{i}:Thing{i}", "function": f"stdlib:mod{i}:run{i}"}[kind]
        lines = [" ".join(sentence(rng) for _ in range(rng.randint(1, 2))) for _ in range(rng.randint(1, 4))]
        lines.insert(rng.randint(0, len(lines)), SHORT_LINE)
        if i % 4 == 0:  # docstring punctuation, so that the tokenizers know ":" (the text-to-text prefix uses it)
            lines.append(f"Returns: {sentence(rng)} See also: section {i % 10}, {sentence(rng)}")
        meta = {"language": "en", "module": f"mod{i}", "docstring_of": kind}
        docs.append((doc_id, "\n".join(lines), json.dumps(meta)))
    docs.append(("web:page1", sentence(rng) + "\n" + sentence(rng), json.dumps({"language": "en"})))
    docs.append(("web:page2", sentence(rng), "{}"))
    return docs


def write_docs(directory, docs, shards=2):
    """Shards of the clean stage's schema (documents dealt round-robin), plus stats.json."""
    directory.mkdir(parents=True, exist_ok=True)
    names = {}
    for s in range(shards):
        part = docs[s::shards]
        n = len(part)
        table = pa.Table.from_pydict(
            {"id": [d[0] for d in part], "text": [d[1] for d in part], "url": [None] * n, "timestamp": [None] * n,
             "source": ["stdlib"] * n, "metadata": [d[2] for d in part]},
            schema=SCHEMA,
        )
        name = f"shard-{s:05d}.parquet"
        pq.write_table(table, directory / name)
        names[name] = "unused"
    (directory / "stats.json").write_text(json.dumps({"shards": names}))
    return directory


def params_at(root, clean=None):
    return Params.model_validate({
        "clean": {"output": str(clean or root / "clean")},
        "split": {"validation": 0.15, "test": 0.15},
        "tokenizer": {"output": str(root / "tokenizers"), "bpe": {"vocab_size": 600}, "wordpiece": {"vocab_size": 500},
                      "unigram": {"vocab_size": 300, "sentinels": 10}, "char": {"word_vocab_size": 300}},
    })


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """(params, documents) of the synthetic docstring corpus, tokenizers of every kind trained on it."""
    from lmforge.tokenization.tokenizer_stage import run_tokenizer

    root = tmp_path_factory.mktemp("finetune")
    docs = docstring_documents()
    write_docs(root / "clean", docs)
    params = params_at(root)
    run_tokenizer(params, log=lambda m: None)
    return params, docs
