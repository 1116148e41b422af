"""The classifier's input standardized before fine-tuning (``finetune.standardize_input``):
the folded layer on fixed inputs, the layer found for every architecture, and the recipe value
reaching the model of both arms."""

from __future__ import annotations

import pytest
import torch
import yaml

from lmforge.models.registry import ARCHITECTURES, build_model
from lmforge.training.input_standardization import (
    classifier_entry,
    entry_inputs,
    first_batches,
    spread,
    standardize_classifier_input,
)


def batches(vocab: int = 1024, n: int = 3) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        mask = torch.ones(8, 16, dtype=torch.long)
        mask[0, 10:] = 0
        out.append({"input_ids": torch.randint(5, vocab, (8, 16), generator=g), "attention_mask": mask,
                    "labels": torch.zeros(8, dtype=torch.long)})
    return out


def test_the_folded_layer_sees_standardized_input():
    torch.manual_seed(0)
    model = build_model("bert-tiny-test", head="classification", num_labels=3, classifier_pooling="mean")
    data = batches()
    x = entry_inputs(model, data).double()  # (24, 64)
    layer = classifier_entry(model)
    assert layer is model.classifier
    w, b = layer.weight.double().clone(), layer.bias.double().clone()
    stats = standardize_classifier_input(model, data)
    assert stats["spread"] == pytest.approx(spread(x)) and stats["mean_norm"] == pytest.approx(float(x.mean(0).norm()))
    z = (x - x.mean(0)) / x.std(0)
    expected = z @ w.T + b  # the old layer on standardized features
    with torch.no_grad():
        got = layer(x.float()).double()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    # so over the examples the layer's outputs average to its old bias
    torch.testing.assert_close(got.mean(0), b, atol=1e-4, rtol=0)
    # the model's own forward reads the same features (eval mode): its logits are the folded layer's
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(**{k: v for k, v in d.items() if k != "labels"}).logits for d in data])
    torch.testing.assert_close(logits.double(), expected, atol=1e-4, rtol=1e-4)


def test_a_layer_without_bias_is_scaled_only():
    torch.manual_seed(0)
    model = build_model("gpt-tiny", head="classification", num_labels=3)
    data = batches(vocab=model.config.vocab_size)
    x = entry_inputs(model, data).double()
    layer = classifier_entry(model)
    assert layer is model.score and layer.bias is None
    w = layer.weight.double().clone()
    standardize_classifier_input(model, data)
    torch.testing.assert_close(layer.weight.double(), w / x.std(0), atol=1e-6, rtol=1e-5)
    assert layer.bias is None and set(model.state_dict()) == set(
        build_model("gpt-tiny", head="classification", num_labels=3).state_dict())


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_architectures_classifier_has_an_entry_layer(arch):
    preset = next(p for p in ARCHITECTURES[arch].presets if p.endswith("-test") or "tiny" in p)
    model = build_model(preset, head="classification", num_labels=4)
    layer = classifier_entry(model)
    expected = {"xlnet": "summary", "gpt": "score", "t5": "classifier.dense", "switch": "classifier.dense",
                "bart": "head.dense"}.get(arch, "classifier")
    assert layer is model.get_submodule(expected)


def test_first_batches_take_the_first_examples_in_order():
    examples = [{"input_ids": [i]} for i in range(10)]
    got = first_batches(examples, lambda rows: [r["input_ids"][0] for r in rows], batch_size=4, limit=9)
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]


def test_one_example_is_not_enough():
    model = build_model("bert-tiny-test", head="classification", num_labels=2)
    one = {k: v[:1] for k, v in batches(n=1)[0].items()}
    with pytest.raises(ValueError, match="rows >= 2"):
        standardize_classifier_input(model, [one])


def test_text_to_text_recipes_refuse_it():
    from lmforge.config.recipes import FinetuneRecipe

    with pytest.raises(ValueError, match="standardize_input applies to the classification heads"):
        FinetuneRecipe(mode="text_to_text", standardize_input=True)


def test_the_recipe_value_reaches_both_arms(project):
    from lmforge.config import load_params
    from lmforge.finetuning.tasks import load_task  # noqa: F401 (the plan loads it)
    from lmforge.training.finetune import initial_model
    from lmforge.training.finetune_plan import plan_finetune
    from lmforge.training.pretrain import run_pretrain

    params = load_params(project / "params.yaml")
    run_pretrain(params, "bert", log=lambda m: None)
    logs: list[str] = []

    def start(scratch: bool, standardize: bool):
        path = project / "pipelines" / "bert.yaml"
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
        recipe["finetune"]["standardize_input"] = standardize
        path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        plan = plan_finetune(load_params(project / "params.yaml"), "bert", str(project / "task"), scratch)
        inputs = plan.family.encode(plan.task, "bert", plan.tok_dir, params.finetune.max_length, plan.mode)
        torch.manual_seed(0)  # as run_finetune seeds before it: the pretrained arm's new head alike in both
        model, *_ = initial_model(plan, inputs, logs.append)
        return plan, model

    for scratch in (True, False):
        plain_plan, plain = start(scratch, False)
        plan, standardized = start(scratch, True)
        assert plan.fingerprint != plain_plan.fingerprint
        w0, w1 = classifier_entry(plain).weight, classifier_entry(standardized).weight
        assert not torch.allclose(w0, w1)
        # the same initial weights, divided by the features' standard deviations: a positive factor per column
        ratio = (w0 / w1)
        assert (ratio > 0).all() and torch.allclose(ratio, ratio[0:1].expand_as(ratio), rtol=1e-4)
        others = {k: v for k, v in standardized.state_dict().items() if not k.startswith("classifier.")}
        assert all(torch.equal(v, plain.state_dict()[k]) for k, v in others.items())
    assert sum("classifier input standardized on" in m for m in logs) == 2
