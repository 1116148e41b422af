"""Fine-tuning on a regression task (GLUE's STS-B files), end to end on the tiny project: the
one-output head trained with mean squared error, selected on validation Pearson, scored on
test with Pearson, Spearman and MSE beside the training-mean and bag-of-words ridge baselines."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import yaml

from lmforge.config import load_params
from lmforge.testing.documents import sentence

from .conftest import write_params
from .test_finetune import FakeTracker

HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"


def write_sts(folder, rng: random.Random) -> None:
    """GLUE STS-B's TSV layout: similar pairs (the same sentence twice) score high, others low."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("dev", 12), ("test", 12)):
        rows = []
        for i in range(n):
            a = sentence(rng)
            same = i % 2 == 0
            score = rng.uniform(3.5, 5.0) if same else rng.uniform(0.0, 1.5)
            rows.append(f"{i}\tmain-captions\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{a}\t"
                        f"{a if same else sentence(rng)}\t{score:.3f}\n")
        (folder / f"{split}.tsv").write_text(HEADER + "".join(rows), encoding="utf-8")


@pytest.mark.parametrize("arch", ["bert", "t5"])
def test_regression_fine_tunes_on_mse_and_selects_on_pearson(project, arch):
    from scipy.stats import rankdata

    from lmforge.finetuning.features import collate, encode_split, pad_id
    from lmforge.finetuning.regression.metrics import correlations
    from lmforge.models.folder import load_model_dir
    from lmforge.finetuning.tasks import load_task
    from lmforge.training import finetune

    task_dir = project / "STS-B"
    write_sts(task_dir, random.Random(5))
    path = project / "pipelines" / f"{arch}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 1, "batch_size": 8, "learning_rate": 0.001, "warmup_ratio": 0.2,
                                           "schedule": "linear", "eval_every": 2, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project, train={"finetune_max_steps": None}))
    logs: list[str] = []
    m = finetune.run_finetune(params, arch, str(task_dir), from_scratch=True, log=logs.append,
                              tracker_factory=FakeTracker)
    assert (m["family"], m["mode"], m["metric"], m["options"]["metric"]) == ("regression", "regression", "pearson",
                                                                              "pearson")
    assert m["validation"]["pearson"] == m["best_validation_pearson"] == m["selection"]["best_value"]
    t = m["test"]
    task = load_task(str(task_dir), params, seed=params.train.seed)
    gold = [e.label for e in task.splits["test"]]
    # the test scores are those of the saved model's values on the test pairs, recomputed here
    # with NumPy (Pearson of the values, of their ranks; the mean squared error)
    out = project / "models" / arch / "STS-B-scratch"
    model, tok_dir = load_model_dir(out / "model"), out / "model" / "tokenizer"
    encoded = encode_split(task, "test", arch, tok_dir, params.finetune.max_length, {}, mode="regression")
    batch = collate(encoded, pad_id(arch, tok_dir))
    with torch.no_grad():
        values = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.float().reshape(-1).numpy()
    assert batch["labels"].float().tolist() == pytest.approx(gold)
    g = np.asarray(gold)
    assert t["examples"] == 12 and values.std() > 0
    assert t["pearson"] == pytest.approx(np.corrcoef(values, g)[0, 1], abs=1e-5)
    assert t["spearman"] == pytest.approx(np.corrcoef(rankdata(values), rankdata(g))[0, 1], abs=1e-5)
    assert t["mse"] == pytest.approx(np.mean((values - g) ** 2), rel=1e-5)
    mean = sum(e.label for e in task.splits["train"]) / len(task.splits["train"])
    assert m["baselines"]["mean"]["mse"] == pytest.approx(correlations([mean] * 12, gold)["mse"])
    assert m["baselines"]["mean"]["pearson"] == 0.0 and "pearson" in m["baselines"]["bag_of_words"]
    meta = json.loads((out / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == "classification" and meta["num_labels"] == 1
    assert json.loads((out / "labels.json").read_text())["mode"] == "regression"
    assert "test Pearson" in logs[-1]
