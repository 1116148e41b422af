"""A tiny project for the training tests: a synthetic corpus cleaned, tokenised and stored once
per session, small tokenizers, short sequences, the repository's recipes, a sqlite MLflow store."""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

import pytest
import yaml

from lmforge.testing.documents import page, sentence, write_jsonl

REPO = Path(__file__).resolve().parents[2]


def write_params(root: Path, **sections) -> Path:
    """params.yaml for the tiny project, with ``sections`` merged over the defaults below."""
    params = {
        "clean": {"inputs": [str(root / "corpus.jsonl")], "workers": 1, "output": str(root / "data/clean")},
        "tokenizer": {"output": str(root / "data/tokenizers"), "bpe": {"vocab_size": 400}, "wordpiece": {"vocab_size": 400},
                      "unigram": {"vocab_size": 300, "sentinels": 20}, "char": {"word_vocab_size": 300}},
        "tokenize": {"output": str(root / "data/tokens")},
        "dataset": {"clm": {"block_size": 32}, "mlm": {"max_length": 32}, "mlm_nsp": {"max_length": 32},
                    "mlm_sop": {"max_length": 32}, "knowledge_mlm": {"max_length": 32, "min_count": 2},
                    "span_corruption": {"input_length": 32}, "denoising": {"max_length": 32},
                    "permutation": {"max_length": 32}, "segments": {"segment_length": 16, "batch_size": 4},
                    "bilm": {"max_length": 16}, "output": str(root / "data/datasets")},
        "train": {"output": str(root / "models"), "recipes": str(root / "pipelines"), "max_steps": 4,
                  "finetune_max_steps": 2, "checkpoint_every": 2, "log_every": 1, "accelerator": "cpu", "threads": 1},
        "finetune": {"tasks": [str(root / "task")], "max_length": 32},
        "evaluate": {"output": str(root / "data/report")},
        "tracking": {"uri": f"sqlite:///{root / 'mlflow.db'}"},
    }
    for key, value in sections.items():
        params[key] = {**params.get(key, {}), **value}
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def write_task(folder: Path, rng: random.Random) -> None:
    """A two-class CSV task: does the sentence start with a word from the first half of a list?"""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("validation", 12), ("test", 12)):
        with open(folder / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["sentence", "label"])
            for i in range(n):
                label = "yes" if i % 2 else "no"
                w.writerow([("Alpha " if label == "yes" else "Omega ") + sentence(rng), label])


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """Clean corpus, four tokenizers and four token stores (built once)."""
    from lmforge.cleaning.stage import run_clean
    from lmforge.config import load_params
    from lmforge.tokenization.tokenizer_stage import run_tokenizer
    from lmforge.tokenization.tokens_stage import run_tokens

    root = tmp_path_factory.mktemp("tiny")
    rng = random.Random(7)
    write_jsonl(root / "corpus.jsonl", [{"id": f"d{i}", "text": page(rng, lines=6)} for i in range(240)])
    write_task(root / "task", rng)
    shutil.copytree(REPO / "pipelines", root / "pipelines", ignore=shutil.ignore_patterns("README.md"))
    params = load_params(write_params(root))
    run_clean(params.clean, log=lambda m: None)
    run_tokenizer(params, log=lambda m: None)
    for kind in params.tokenizer.kinds:
        run_tokens(params, kind, log=lambda m: None)
    return root


def share_tiny_data(tiny_data: Path, root: Path, **sections) -> Path:
    """Make ``root`` a project sharing the session's data (read-only) with its own outputs and
    recipes; returns its params.yaml (``sections`` as in ``write_params``)."""
    (root / "data").mkdir()
    for sub in ("clean", "tokenizers", "tokens"):
        (root / "data" / sub).symlink_to(tiny_data / "data" / sub)
    shutil.copytree(tiny_data / "pipelines", root / "pipelines")
    shutil.copytree(tiny_data / "task", root / "task")
    (root / "corpus.jsonl").symlink_to(tiny_data / "corpus.jsonl")
    return write_params(root, **sections)


@pytest.fixture
def project(tiny_data, tmp_path) -> Path:
    """A fresh project folder sharing the session's data (read-only) with its own outputs."""
    share_tiny_data(tiny_data, tmp_path)
    return tmp_path


def edit_recipe(root: Path, arch: str, **pretrain) -> None:
    """Change the tiny size's pretraining settings (and model overrides via ``model=``) of a recipe."""
    path = root / "pipelines" / f"{arch}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    tiny = recipe["sizes"]["tiny"]
    if "model" in pretrain:
        tiny["model"] = {**tiny.get("model", {}), **pretrain.pop("model")}
    tiny["pretrain"].update(pretrain)
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
