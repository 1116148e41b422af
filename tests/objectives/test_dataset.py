"""The dataset stage over real token stores: stats, static materialisation, dynamic re-draws."""

import json

import numpy as np
import pytest

from lmforge.config import Params
from lmforge.objectives.base import ObjectiveError, Vocab
from lmforge.datasets.open import ObjectiveDataset, open_objective
from lmforge.datasets.stage import StaticDataset, run_dataset
from lmforge.objectives.features import pad_batch
from lmforge.objectives.registry import OBJECTIVE_TOKENIZER, OBJECTIVES
from lmforge.tokenizer_kinds import KINDS

from ..tokenization.conftest import tokenized_project

SMALL = {"span_corruption": {"input_length": 128}, "segments": {"batch_size": 4}, "statistics_examples": 64}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ds")
    return tmp, tokenized_project(tmp, 300, SMALL)


def test_registry_and_tokenizer_map_agree():
    assert set(OBJECTIVES) == set(OBJECTIVE_TOKENIZER)
    assert set(OBJECTIVE_TOKENIZER.values()) <= set(KINDS)
    assert all(cls.name == name for name, cls in OBJECTIVES.items())


def test_vocab_roles_come_from_the_saved_tokenizer(pipeline):
    tmp, params = pipeline
    wp = Vocab.from_tokenizer(tmp / "tokenizers" / "wordpiece")
    assert (wp.pad, wp.unk, wp.cls, wp.sep, wp.mask) == (0, 1, 2, 3, 4) and wp.eos is None
    uni = Vocab.from_tokenizer(tmp / "tokenizers" / "unigram")
    assert (uni.pad, uni.eos, uni.unk) == (0, 1, 2)
    assert uni.sentinels[0] == uni.size - 1 and list(np.diff(uni.sentinels)) == [-1] * 19
    assert Vocab.from_tokenizer(tmp / "tokenizers" / "char").char_table is not None


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_objective_builds_batches_from_its_store(pipeline, name):
    _, params = pipeline
    objective = open_objective(params, name)
    assert len(objective) > 0
    data = ObjectiveDataset(objective, seed=3)
    examples = [data[i] for i in range(min(8, len(data)))]
    batch = pad_batch(examples, pad_id=objective.vocab.pad if objective.vocab.pad is not None else 0)
    assert batch["input_ids"].shape[0] == len(examples)
    assert int(batch["input_ids"].max()) < objective.vocab.size


def test_dynamic_masks_change_per_epoch_and_reproduce(pipeline):
    _, params = pipeline
    data = ObjectiveDataset(open_objective(params, "mlm"), seed=0)
    first = data[5]["labels"].copy()
    data.set_epoch(1)
    second = data[5]["labels"].copy()
    data.set_epoch(0)
    assert not np.array_equal(first, second) and np.array_equal(first, data[5]["labels"])


def test_stats_and_static_mode(pipeline):
    tmp, params = pipeline
    summary = run_dataset(params, "mlm", log=lambda m: None)
    stats = json.loads((tmp / "datasets" / "mlm" / "stats.json").read_text())
    assert stats == json.loads(json.dumps(summary))
    train = stats["splits"]["train"]
    assert 0.12 < train["labels_per_input_token"] < 0.16 and train["input_length_histogram"]
    assert not (tmp / "datasets" / "mlm" / "train.parquet").exists()  # dynamic: nothing materialised
    # its pictures: the realised mask rate and run lengths against the configuration, the input lengths
    from types import SimpleNamespace

    from lmforge.stages import KINDS as STAGE_KINDS
    from lmforge.stages.kind import Image

    out = tmp / "datasets" / "mlm"
    for name in ("masking", "input_lengths"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    shown = STAGE_KINDS["dataset"].metadata(SimpleNamespace(key={"objective": "mlm"}), params, out)
    assert isinstance(shown["masking"], Image) and isinstance(shown["input_lengths"], Image)

    static = Params.model_validate({**params.model_dump(mode="json"), "dataset": {**params.dataset.model_dump(mode="json"), "mode": "static"}})
    built = run_dataset(static, "span_corruption", log=lambda m: None)
    spans = {int(n): c for n, c in built["splits"]["train"]["noise_span_lengths"].items()}
    assert sum(n * c for n, c in spans.items()) / sum(spans.values()) == \
        pytest.approx(built["splits"]["train"]["mean_noise_span_length"], abs=1e-4)
    assert (tmp / "datasets" / "span_corruption" / "masking.png").exists()
    stored = StaticDataset(tmp / "datasets" / "span_corruption" / "train.parquet")
    live = ObjectiveDataset(open_objective(static, "span_corruption"), seed=static.dataset.seed)
    assert len(stored) == len(live)
    for i in (0, len(live) - 1):
        for key, value in live[i].items():
            assert np.array_equal(stored[i][key], value), key
    logs = []
    run_dataset(static, "span_corruption", log=logs.append)
    assert logs == ["dataset span_corruption: up to date"]


def test_bad_parameters_and_missing_store(pipeline, tmp_path):
    _, params = pipeline
    from lmforge.config import ConfigError, load_params

    with pytest.raises(ConfigError, match="dataset.objectives"):
        load_params(None, ["dataset.objectives=[mlm, nope]"])
    bad = Params.model_validate({**params.model_dump(mode="json"), "dataset": {**params.dataset.model_dump(mode="json"), "mlm": {"mask_rate": 1.5}}})
    with pytest.raises(ObjectiveError, match="mask_rate"):
        open_objective(bad, "mlm")
    elsewhere = Params.model_validate({**params.model_dump(mode="json"), "tokenize": {"output": str(tmp_path / "none")}})
    from lmforge.tokenization.store import StoreError

    with pytest.raises(StoreError, match="not a token store"):
        open_objective(elsewhere, "clm")
