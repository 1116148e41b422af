"""Projects for the stage-graph tests: the repository's ``params.yaml`` with a tiny configuration
merged over it, every path RELATIVE to the project folder (what ``dvc.yaml`` needs), and the
repository's recipes. The tiny corpus, task and training fixtures are the training tests' own."""

from __future__ import annotations

import copy
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from lmforge.config import Params, parse_params
from lmforge.testing.documents import page, write_jsonl

from ..training.conftest import REPO, edit_recipe, project, tiny_data, write_params, write_task

# re-exported: the tiny training project's fixtures and helpers, for the tests here
__all__ = ["REPO", "edit_recipe", "project", "tiny_data", "write_params", "graph_project", "tiny_params", "write_corpus",
           "dvc_graph_of"]

# Small vocabularies and sequences, a few steps, one thread: seconds per stage on a CPU.
TINY: dict[str, Any] = {
    "clean": {"inputs": ["corpus.jsonl"], "workers": 1},
    "tokenizer": {"kinds": ["bpe"], "bpe": {"vocab_size": 400}, "wordpiece": {"vocab_size": 400},
                  "unigram": {"vocab_size": 300, "sentinels": 20}, "char": {"word_vocab_size": 300}},
    "dataset": {"objectives": ["clm"], "statistics_examples": 50, "clm": {"block_size": 32},
                "span_corruption": {"input_length": 32}},
    "train": {"architectures": ["gpt"], "max_steps": 4, "finetune_max_steps": 2, "checkpoint_every": 2,
              "log_every": 1, "accelerator": "cpu", "threads": 1},
    "finetune": {"tasks": ["task"], "max_length": 32},
}


def merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``, mapping by mapping (lists and values replaced)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def tiny_params(**sections: dict) -> dict:
    """The repository's params.yaml, every key written out as DVC wants, with TINY and then
    ``sections`` merged over it."""
    repo = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    return merge(merge(repo, TINY), sections)


def graph_project(root: Path, **sections: dict) -> Params:
    """A project folder at ``root`` with the repository's recipes; its params (not written)."""
    if not (root / "pipelines").exists():
        shutil.copytree(REPO / "pipelines", root / "pipelines")
    return parse_params(tiny_params(**sections))


def write_corpus(root: Path, documents: int = 240) -> None:
    """The training tests' synthetic corpus (corpus.jsonl) and two-class task (task/)."""
    rng = random.Random(7)
    write_jsonl(root / "corpus.jsonl", [{"id": f"d{i}", "text": page(rng, lines=6)} for i in range(documents)])
    write_task(root / "task", rng)


def dvc_graph_of(stages: dict[str, dict]) -> tuple[set[str], set[tuple[str, str]]]:
    """Nodes and edges of ``dvc.yaml``'s stages as DVC derives them from paths: (A, B) where a
    dependency of B is an output of A, lies inside one, or contains one."""

    def overlap(a: str, b: str) -> bool:
        return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")

    outs = {name: [next(iter(o)) if isinstance(o, dict) else o for section in ("outs", "metrics", "plots")
                   for o in entry.get(section, [])] for name, entry in stages.items()}
    edges = {(a, b) for b, entry in stages.items() for dep in entry.get("deps", []) for a in stages
             if a != b and any(overlap(dep, o) for o in outs[a])}
    return set(stages), edges


@pytest.fixture
def graph_root(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root
