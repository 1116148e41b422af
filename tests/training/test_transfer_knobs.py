"""The recipe values that make a short pretraining pay reach the model: ``pretrain_model`` (no
dropout while pretraining, the saved model keeping the fine-tuning rates), and the warm-start
remedies ``shrink_perturb`` and ``reinit_top_layers``, each against a hand computation."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from lmforge.config import load_params
from lmforge.models.registry import build_model
from lmforge.training.module import LMForgeModule
from lmforge.training.warm_start import reinit_top_layers, shrink_and_perturb

from .test_finetune import FakeTracker
from .conftest import write_params


def _recipe(project, arch: str, edit) -> None:
    path = project / "pipelines" / f"{arch}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(recipe)
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")


def _dropouts(model: torch.nn.Module) -> set[float]:
    return {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}


def test_pretrain_model_turns_dropout_off_while_pretraining_only(project, monkeypatch):
    from lmforge.training import finetune, pretrain

    # a rate the recipe's `model` also sets: pretraining takes pretrain_model's, the saved model keeps model's
    _recipe(project, "bert", lambda r: r["sizes"]["tiny"].update(
        model={**(r["sizes"]["tiny"].get("model") or {}), "attn_dropout": 0.1},
        pretrain_model={"dropout": 0.0, "attn_dropout": 0.0}))
    params = load_params(write_params(project))
    seen: list[set[float]] = []

    class Recording(LMForgeModule):
        def __init__(self, model, *args, **kwargs):
            seen.append(_dropouts(model))
            super().__init__(model, *args, **kwargs)

    monkeypatch.setattr(pretrain, "LMForgeModule", Recording)
    monkeypatch.setattr(finetune, "LMForgeModule", Recording)
    metrics = pretrain.run_pretrain(params, "bert", log=lambda _: None, tracker_factory=FakeTracker)
    meta = json.loads((project / "models" / "bert" / "pretrain" / "model" / "lmforge_model.json").read_text())
    assert "dropout" not in meta["config_overrides"] and metrics["steps"] == 4
    finetune.run_finetune(params, "bert", str(project / "task"), log=lambda _: None, tracker_factory=FakeTracker)
    assert seen[0] == {0.0}                 # pretraining: every dropout off
    assert seen[1] == {0.1}                 # fine-tuning from the saved model: the preset's rate


def test_pretrain_model_may_only_change_dropout_rates(project):
    from lmforge.config import ConfigError
    from lmforge.config.recipes import load_recipe

    _recipe(project, "bert", lambda r: r["sizes"]["tiny"].update(pretrain_model={"d_model": 32}))
    params = load_params(write_params(project))
    with pytest.raises(ConfigError, match="pretrain_model: d_model: only the dropout rates"):
        load_recipe(params, "bert")


def test_pretrain_model_takes_transformer_xls_attention_dropout(project):
    """Transformer-XL calls its attention dropout ``dropatt``: a dropout rate like the others."""
    from lmforge.config.recipes import load_recipe

    _recipe(project, "transformer_xl",
            lambda r: r["sizes"]["tiny"].update(pretrain_model={"dropout": 0.0, "dropatt": 0.0}))
    params = load_params(write_params(project))
    assert load_recipe(params, "transformer_xl").sizes["tiny"].pretrain_model == {"dropout": 0.0, "dropatt": 0.0}


def _classifier(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model("bert-tiny-test", head="classification", num_labels=3)


def test_shrink_and_perturb_is_the_weighted_sum_of_the_two_starts():
    model, fresh = _classifier(seed=0), _classifier(seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    shrink_and_perturb(model, fresh, 0.4, 0.6)
    after, init = model.state_dict(), fresh.state_dict()
    for name, _ in model.named_parameters():
        assert torch.allclose(after[name], 0.4 * before[name] + 0.6 * init[name], atol=1e-6), name
    # (0, 1) is exactly the control's start
    shrink_and_perturb(model, fresh, 0.0, 1.0)
    assert all(torch.equal(model.state_dict()[n], init[n]) for n, _ in model.named_parameters())


def test_reinit_top_layers_resets_the_top_layer_and_the_pooler_and_nothing_below():
    model, fresh = _classifier(seed=0), _classifier(seed=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    names = reinit_top_layers(model, fresh, 1)
    assert names and all(".layers.1." in n or "pooler" in n or "classifier" in n for n in names)
    assert any("pooler" in n for n in names) and any(".layers.1." in n for n in names)
    now, init = model.state_dict(), fresh.state_dict()
    for name, _ in model.named_parameters():
        expected = init[name] if name in names else before[name]
        assert torch.equal(now[name], expected), name


def test_reinit_top_layers_on_albert_s_shared_block_is_an_error_not_a_silent_no_op():
    from lmforge.config import ConfigError
    from lmforge.config.recipes import FinetuneRecipe
    from lmforge.training.finetune_model import warm_start

    torch.manual_seed(0)
    model = build_model("albert-tiny", head="classification", num_labels=3, vocab_size=50, max_positions=16)
    fresh = build_model("albert-tiny", head="classification", num_labels=3, vocab_size=50, max_positions=16)
    with pytest.raises(ConfigError, match="reinit_top_layers: .*no indexed layer stack"):
        warm_start(model, fresh, FinetuneRecipe(mode="classification", reinit_top_layers=1))
    assert warm_start(model, fresh, FinetuneRecipe(mode="classification", shrink_perturb=(0.5, 0.5))).startswith(
        "warm start: weights shrunk x0.5")


def test_the_warm_start_options_reach_the_pretrained_arm_and_not_the_control(project, monkeypatch):
    from lmforge.training import finetune
    from lmforge.training.pretrain import run_pretrain

    params = load_params(write_params(project))
    run_pretrain(params, "bert", log=lambda _: None, tracker_factory=FakeTracker)
    task = str(project / "task")
    starts: list[dict[str, torch.Tensor]] = []

    class Recording(LMForgeModule):
        def __init__(self, model, *args, **kwargs):
            starts.append({k: v.clone() for k, v in model.state_dict().items()})
            super().__init__(model, *args, **kwargs)

    monkeypatch.setattr(finetune, "LMForgeModule", Recording)
    logs: list[str] = []
    plain = finetune.run_finetune(params, "bert", task, log=logs.append, tracker_factory=FakeTracker)
    scratch = finetune.run_finetune(params, "bert", task, from_scratch=True, log=logs.append, tracker_factory=FakeTracker)
    _recipe(project, "bert", lambda r: r["sizes"]["tiny"].update(warm_start={"shrink_perturb": [0.5, 0.5]}))
    mixed = finetune.run_finetune(params, "bert", task, log=logs.append, tracker_factory=FakeTracker)
    again = finetune.run_finetune(params, "bert", task, from_scratch=True, log=logs.append, tracker_factory=FakeTracker)
    pre, control, half = starts[0], starts[1], starts[2]
    backbone = [k for k in pre if "classifier" not in k and pre[k].is_floating_point()]
    assert all(torch.allclose(half[k], 0.5 * pre[k] + 0.5 * control[k], atol=1e-6) for k in backbone)
    assert any("warm start: weights shrunk x0.5" in line for line in logs)
    # the option changes the pretrained arm's fingerprint, not the control's (which is reused)
    assert mixed["fingerprint"] != plain["fingerprint"] and again["fingerprint"] == scratch["fingerprint"]
    assert len(starts) == 3


def test_a_size_s_warm_start_replaces_the_recipe_s_for_that_size_only(project):
    from lmforge.config import ConfigError
    from lmforge.config.recipes import load_recipe, recipe_param_keys

    _recipe(project, "t5", lambda r: (r["finetune"].update(shrink_perturb=[0.8, 0.2], reinit_top_layers=0),
                                      r["sizes"]["tiny"].update(warm_start={"reinit_top_layers": 2})))
    params = load_params(write_params(project))
    recipe = load_recipe(params, "t5")
    tiny, base = recipe.finetune_at(recipe.sizes["tiny"]), recipe.finetune_at(recipe.sizes["base"])
    assert (tiny.reinit_top_layers, tiny.shrink_perturb) == (2, (0.8, 0.2))  # the size's value, the rest kept
    assert (base.reinit_top_layers, base.shrink_perturb) == (0, (0.8, 0.2))
    assert tiny.mode == recipe.finetune.mode and tiny.pooling == recipe.finetune.pooling
    assert "sizes.tiny.warm_start" in recipe_param_keys(params, "t5", "finetune")  # a DVC parameter of fine-tuning
    assert "sizes.tiny.warm_start" not in recipe_param_keys(params, "t5", "pretrain")
    _recipe(project, "t5", lambda r: r["sizes"]["tiny"].update(warm_start={"shrink_perturb": [0.0, 0.0]}))
    with pytest.raises(ConfigError, match="sizes.tiny.warm_start: .*not both zero"):
        load_recipe(params, "t5")
    _recipe(project, "t5", lambda r: r["sizes"]["tiny"].update(warm_start={"freeze": ["layers"]}))
    with pytest.raises(ConfigError, match="warm_start"):
        load_recipe(params, "t5")


def test_albert_sharing_in_the_recipe_reaches_the_pretrained_and_the_fine_tuned_model(project, monkeypatch):
    from lmforge.training import finetune, pretrain

    _recipe(project, "albert", lambda r: r["sizes"]["tiny"].setdefault("model", {}).update(sharing="attention"))
    params = load_params(write_params(project))
    seen: list[str] = []

    class Recording(LMForgeModule):
        def __init__(self, model, *args, **kwargs):
            seen.append(model.albert.config.sharing)
            assert model.albert.blocks[1].attn is model.albert.blocks[0].attn
            super().__init__(model, *args, **kwargs)

    monkeypatch.setattr(pretrain, "LMForgeModule", Recording)
    monkeypatch.setattr(finetune, "LMForgeModule", Recording)
    pretrain.run_pretrain(params, "albert", log=lambda _: None, tracker_factory=FakeTracker)
    finetune.run_finetune(params, "albert", str(project / "task"), log=lambda _: None, tracker_factory=FakeTracker)
    assert seen == ["attention", "attention"]
