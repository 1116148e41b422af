"""Model folders of every architecture, randomly initialised (seeded) with the tokenizers of the
synthetic docstring corpus, as ``lmforge pretrain`` writes them."""

import json
from pathlib import Path

import pytest
import torch

from lmforge.finetuning.features import model_overrides
from lmforge.models.folder import save_model_dir
from lmforge.models.registry import build_model
from lmforge.tokenizer_kinds import ARCHITECTURE_TOKENIZER

from ..finetuning.conftest import corpus  # noqa: F401  (the session fixture)

PRESETS = {"gpt": "gpt-tiny", "bert": "bert-tiny", "albert": "albert-tiny", "ernie": "ernie-tiny-test",
           "elmo": "elmo-tiny", "transformer_xl": "txl-tiny", "xlnet": "xlnet-tiny", "bart": "bart-tiny",
           "t5": "t5-tiny", "switch": "switch-tiny"}


def tokenizer_of(params, arch: str) -> Path:
    return Path(params.tokenizer.output) / ARCHITECTURE_TOKENIZER[arch]


def write_model(params, arch: str, out: Path, head: str | None = None, num_labels: int | None = None,
                seed: int = 0, **extra) -> Path:
    tok = tokenizer_of(params, arch)
    overrides = {**model_overrides(arch, tok), **extra}
    torch.manual_seed(seed)
    model = build_model(PRESETS[arch], head=head, num_labels=num_labels, **overrides)
    return save_model_dir(model, PRESETS[arch], head, overrides, out, num_labels=num_labels,
                          extra_files={"tokenizer": tok})


def write_toy_classifier(params, run: Path) -> Path:
    """A BERT classifier run folder (model + task record) with three labels; returns the model folder."""
    model_dir = write_model(params, "bert", run / "model", head="classification", num_labels=3)
    (model_dir / "task.json").write_text(json.dumps({"labels": ["module", "class", "function"], "mode": "classification",
                                                     "prefix": "toy", "max_length": 32}))
    return model_dir


def redraw_weights(loaded, std: float, seed: int):
    """The loaded model's matrices drawn again from N(0, std), larger than at initialisation, so
    that its distributions are far from flat and comparisons do not ride on near-ties."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in loaded.model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
    return loaded


@pytest.fixture(scope="session")
def models(corpus, tmp_path_factory):  # noqa: F811
    """arch -> the folder of its pretraining model."""
    params, _ = corpus
    root = tmp_path_factory.mktemp("models")
    return {arch: write_model(params, arch, root / arch / "pretrain" / "model") for arch in PRESETS}
