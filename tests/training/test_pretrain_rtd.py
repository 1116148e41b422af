"""BERT pretrained with ELECTRA's replaced-token detection (a recipe's ``head: rtd`` on the
``mlm`` objective), then fine-tuned from its discriminator."""

from __future__ import annotations

import json

import torch
import yaml

from lmforge.config import load_params


def use_rtd(root, arch: str = "bert", objective: str = "mlm") -> None:
    path = root / "pipelines" / f"{arch}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe.update(objective=objective, head="rtd")
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")


def test_bert_pretrains_with_rtd_and_its_discriminator_is_fine_tuned(project):
    from lmforge.datasets.stage import run_dataset
    from lmforge.models.folder import load_model_dir
    from lmforge.training.finetune import run_finetune
    from lmforge.training.pretrain import run_pretrain

    use_rtd(project)
    params = load_params(project / "params.yaml", ["train.max_steps=6"])
    run_dataset(params, "mlm", log=lambda m: None)
    metrics = run_pretrain(params, "bert", log=lambda m: None)
    out = project / "models" / "bert" / "pretrain"
    meta = json.loads((out / "model" / "lmforge_model.json").read_text())
    assert meta["head"] == "rtd" and metrics["steps"] == 6
    model = load_model_dir(out / "model")
    assert type(model).__name__ == "BertForReplacedTokenDetection"
    # the validation loss is the generator's masked LM, against the same unigram baseline as BERT's
    v = metrics["validation"]
    assert 0 < v["loss"] < v["uniform_loss"] and v["unigram_loss"] > 0
    # the classifier starts from the discriminator's encoder; the generator is left behind
    from lmforge.training.finetune_model import build_finetune_model

    classifier, preset, _, head = build_finetune_model(out / "model", "bert", "classification", 2)
    assert head == "classification" and preset == meta["preset"]
    for name, value in model.encoder.state_dict().items():
        assert torch.equal(classifier.encoder.state_dict()[name], value), name
    assert not any(k.startswith("generator.") for k in classifier.state_dict())

    result = run_finetune(params, "bert", str(project / "task"), log=lambda m: None)
    assert result["init"] == "pretrained" and result["mode"] == "classification" and result["steps"] == 2
    # the fine-tuned classifier is BERT's own sequence classifier, not the pretraining head
    from lmforge import layout

    tuned = json.loads((project / layout.finetune_dir(params, "bert", result["task"]) / "model" / "lmforge_model.json")
                       .read_text(encoding="utf-8"))
    assert tuned["head"] == "classification" and tuned["preset"] == meta["preset"]
