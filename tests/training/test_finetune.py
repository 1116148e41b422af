"""Fine-tuning: the budget in epochs, model selection on the validation metric (best weights
restored, early stopping), class weights, layer-wise learning rates, freezing, and the
from-scratch control. Tiny models and a few steps: this checks the mechanics, not the learning."""

from __future__ import annotations

import csv
import shutil
import json
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from lmforge.config import load_params
from lmforge.models.layers import ModelOutput
from lmforge.models.registry import build_model
from lmforge.models.generation import candidate_scores
from lmforge.training.module import LMForgeModule, balanced_class_weights, weighted_classification_loss
from lmforge.training.param_groups import freeze, optimizer_groups, placements
from lmforge.config.recipes import FinetuneOptimConfig, FinetuneRecipe, resolve_finetune_budget

from .conftest import REPO, write_params


# ----------------------------------------------------------------------------- the budget


def test_an_epoch_budget_gives_the_expected_steps_and_warmup():
    base = {"batch_size": 8, "learning_rate": 1e-3}
    # 3 epochs of 100 examples at 8 x 2 accumulation x 2 processes: ceil(300 / 32) = 10 steps
    o = resolve_finetune_budget(FinetuneOptimConfig(epochs=3, accumulate_grad_batches=2, warmup_ratio=0.1, **base), 100, 2)
    assert (o.max_steps, o.warmup_steps) == (10, 1)
    assert resolve_finetune_budget(FinetuneOptimConfig(epochs=2, **base), 40).max_steps == 10  # exact: no extra step
    assert resolve_finetune_budget(FinetuneOptimConfig(epochs=0.1, batch_size=3, learning_rate=1e-3), 30).max_steps == 1
    assert resolve_finetune_budget(FinetuneOptimConfig(epochs=0.5, **base), 1).max_steps == 1  # at least one step
    o = resolve_finetune_budget(FinetuneOptimConfig(max_steps=100, warmup_steps=7, **base), 5000)
    assert (o.max_steps, o.warmup_steps) == (100, 7)
    assert resolve_finetune_budget(FinetuneOptimConfig(max_steps=50, warmup_ratio=0.06, **base), 10).warmup_steps == 3
    for bad in ({"epochs": 1, "max_steps": 5}, {}, {"max_steps": 5, "warmup_steps": 2, "warmup_ratio": 0.1}):
        with pytest.raises(ValueError):
            FinetuneOptimConfig(**bad, **base)


def test_recipe_keys_are_validated_and_the_step_override_replaces_epochs(tmp_path):
    from lmforge.config import ConfigError
    from lmforge.config.recipes import load_recipe, size_recipe

    with pytest.raises(ValueError, match="class_weights"):
        FinetuneRecipe(mode="text_to_text", class_weights="balanced")
    with pytest.raises(ValueError):
        FinetuneRecipe(mode="classification", freeze=["heads"])
    assert FinetuneRecipe(mode="classification").metric == "accuracy"
    (tmp_path / "pipelines").mkdir()
    recipe = yaml.safe_load(open("pipelines/bert.yaml", encoding="utf-8"))
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 3, "batch_size": 16, "learning_rate": 1e-3, "warmup_ratio": 0.1,
                                           "schedule": "linear"}
    (tmp_path / "pipelines" / "bert.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(tmp_path, train={"finetune_max_steps": None}))
    assert size_recipe(params, load_recipe(params, "bert")).finetune.epochs == 3
    params = load_params(write_params(tmp_path, train={"finetune_max_steps": 7}))
    s = size_recipe(params, load_recipe(params, "bert")).finetune
    assert (s.max_steps, s.epochs, resolve_finetune_budget(s, 1000).max_steps) == (7, None, 7)
    recipe["finetune"]["patience"] = 0
    (tmp_path / "pipelines" / "bert.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(ConfigError, match="finetune.patience"):
        load_recipe(params, "bert")


def test_a_family_budget_replaces_only_its_keys_and_bad_ones_name_the_family(tmp_path):
    from lmforge.config import ConfigError
    from lmforge.config.recipes import load_recipe, recipe_param_keys, size_recipe

    (tmp_path / "pipelines").mkdir()
    recipe = yaml.safe_load(open("pipelines/t5.yaml", encoding="utf-8"))
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 2, "batch_size": 32, "learning_rate": 1e-3, "warmup_ratio": 0.1,
                                           "schedule": "linear"}
    recipe["sizes"]["tiny"]["finetune_families"] = {"generation": {"max_steps": 300, "warmup_steps": 12,
                                                                   "learning_rate": 3e-3}}
    (tmp_path / "pipelines" / "t5.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(tmp_path, train={"finetune_max_steps": None}))
    loaded = load_recipe(params, "t5", root=tmp_path)
    plain = size_recipe(params, loaded).finetune
    assert plain == size_recipe(params, loaded, "classification").finetune == size_recipe(params, loaded, "tagging").finetune
    gen = size_recipe(params, loaded, "generation").finetune
    # max_steps replaces epochs, warmup_steps replaces warmup_ratio, the rest is the recipe's
    assert (gen.max_steps, gen.epochs, gen.warmup_steps, gen.warmup_ratio) == (300, None, 12, None)
    assert (gen.learning_rate, gen.batch_size, gen.schedule) == (3e-3, 32, "linear")
    assert resolve_finetune_budget(gen, 1000).max_steps == 300
    assert "sizes.tiny.finetune_families" in recipe_param_keys(params, "t5", "finetune", root=tmp_path)
    assert "sizes.tiny.finetune_families" not in recipe_param_keys(params, "t5", "pretrain", root=tmp_path)
    # the command line's step override still wins over a family's budget
    params = load_params(write_params(tmp_path, train={"finetune_max_steps": 5}))
    assert size_recipe(params, load_recipe(params, "t5", root=tmp_path), "generation").finetune.max_steps == 5
    for bad, named in (({"epochs": 0}, "finetune_families.generation: epochs"),
                       ({"beams": 4}, "finetune_families.generation: beams"),
                       ({"epochs": 3, "max_steps": 9}, "exactly one of max_steps and epochs")):
        recipe["sizes"]["tiny"]["finetune_families"] = {"generation": bad}
        (tmp_path / "pipelines" / "t5.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
        with pytest.raises(ConfigError, match=named):
            load_recipe(params, "t5", root=tmp_path)
    recipe["sizes"]["tiny"]["finetune_families"] = {"classification": {"epochs": 3}}
    (tmp_path / "pipelines" / "t5.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(ConfigError, match="finetune_families"):
        load_recipe(params, "t5", root=tmp_path)


# ----------------------------------------------------------------------------- class weights


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
def test_balanced_class_weights_and_the_weighted_loss_are_exactly_as_defined():
    from sklearn.utils.class_weight import compute_class_weight

    labels = [0, 0, 0, 0, 1, 2, 2, 0]
    w = balanced_class_weights(labels, 3)
    assert torch.allclose(w, torch.tensor([8 / (3 * 5), 8 / (3 * 1), 8 / (3 * 2)]))
    assert np.allclose(w.numpy(), compute_class_weight("balanced", classes=np.arange(3), y=np.array(labels)))
    assert balanced_class_weights([1, 1, 0], 3)[2] == 1.0  # a class with no training example

    torch.manual_seed(0)
    logits, y = torch.randn(8, 3), torch.tensor(labels)
    expected = F.cross_entropy(logits, y, weight=w)
    plain = ModelOutput(logits=logits, loss=F.cross_entropy(logits, y))
    assert torch.equal(weighted_classification_loss(plain, y, w), expected)
    assert not torch.isclose(expected, plain.loss)
    # a head that adds to its task loss (GPT-1's auxiliary LM): the addition is kept
    lm = torch.tensor(2.5)
    gpt = ModelOutput(logits=logits, loss=plain.loss + 0.5 * lm, aux={"cls_loss": plain.loss, "lm_loss": lm})
    assert torch.isclose(weighted_classification_loss(gpt, y, w), expected + 0.5 * lm)

    # the training step of a classification head uses it
    model = build_model("bert-tiny", head="classification", num_labels=3, vocab_size=50, max_positions=16).eval()
    batch = {"input_ids": torch.randint(5, 50, (8, 6)), "attention_mask": torch.ones(8, 6, dtype=torch.long), "labels": y}
    module = LMForgeModule(model, resolve_finetune_budget(FinetuneOptimConfig(max_steps=1, batch_size=8, learning_rate=1e-3), 8),
                           class_weights=w)
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        assert torch.isclose(module.training_step(batch, 0), F.cross_entropy(logits, y, weight=w))


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
def test_tag_weights_weigh_a_tagger_s_labelled_positions_and_only_with_heads():
    from lmforge.models.token_classification import token_classifier  # noqa: F401  (the head's registry entry)

    with pytest.raises(ValueError, match="tag_weights apply to the tagging heads"):
        FinetuneRecipe(mode="text_to_text", tag_weights="balanced")
    assert FinetuneRecipe(mode="classification", tag_weights="balanced").tag_weights == "balanced"
    torch.manual_seed(0)
    model = build_model("bert-tiny", head="token_classification", num_labels=3, vocab_size=50, max_positions=16).eval()
    ids = torch.randint(5, 50, (4, 7))
    tags = torch.tensor([[-100, 0, 0, 1, -100, 0, -100], [-100, 0, 2, 0, 0, -100, -100],
                         [-100, 0, 0, 0, 0, 0, -100], [-100, 1, 0, 0, 0, 0, -100]])
    w = balanced_class_weights([t for t in tags.reshape(-1).tolist() if t >= 0], 3)
    assert torch.allclose(w, torch.tensor([18 / (3 * 15), 18 / (3 * 2), 18 / (3 * 1)]))  # 18 labelled positions
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": tags}
    module = LMForgeModule(model, resolve_finetune_budget(FinetuneOptimConfig(max_steps=1, batch_size=4, learning_rate=1e-3), 4),
                           class_weights=w)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=batch["attention_mask"]).logits
        expected = F.cross_entropy(logits.reshape(-1, 3), tags.reshape(-1), weight=w)  # -100 ignored
        assert torch.isclose(module.training_step(batch, 0), expected)
        assert not torch.isclose(expected, F.cross_entropy(logits.reshape(-1, 3), tags.reshape(-1)))


# ----------------------------------------------------------------------------- layer decay, freezing


def _rates(model, decay, lr=1.0):
    return {id(p): g["lr"] for g in optimizer_groups(model, 0.01, lr, decay) for p in g["params"]}


def test_layer_decay_gives_each_depth_its_rate_on_bert_and_gpt():
    bert = build_model("bert-tiny", head="classification", num_labels=2, vocab_size=50, max_positions=16)
    n = bert.config.n_layers
    rates = _rates(bert, 0.5)
    for name, p in bert.named_parameters():
        if name.startswith("encoder.embeddings."):
            want = 0.5 ** n
        elif name.startswith("encoder.layers."):
            want = 0.5 ** (n - 1 - int(name.split(".")[2]))
        else:  # pooler and classifier: the head
            assert name.startswith(("encoder.pooler.", "classifier.")), name
            want = 1.0
        assert rates[id(p)] == pytest.approx(want), name

    gpt = build_model("gpt-tiny", head="classification", num_labels=2, vocab_size=50)
    n = gpt.config.n_layers
    rates = _rates(gpt, 0.8, lr=1e-3)
    for name, p in gpt.named_parameters():
        if name in ("gpt.wte.weight", "gpt.wpe.weight"):
            want = 0.8 ** n
        elif name.startswith("gpt.blocks."):
            want = 0.8 ** (n - 1 - int(name.split(".")[2]))
        else:
            assert name in ("gpt.ln_f.weight", "gpt.ln_f.bias", "score.weight"), name
            want = 1.0
        assert rates[id(p)] == pytest.approx(1e-3 * want), name

    # the base rate comes first; weight decay on matrices only; without decay two groups as before
    groups = optimizer_groups(gpt, 0.01, 1e-3, 0.8)
    assert groups[0]["lr"] == 1e-3 and all(g["weight_decay"] == (0.01 if g["params"][0].ndim >= 2 else 0.0) for g in groups)
    plain = optimizer_groups(gpt, 0.01, 1e-3)
    assert [(g["lr"], g["weight_decay"]) for g in plain] == [(1e-3, 0.01), (1e-3, 0.0)]
    assert sum(len(g["params"]) for g in plain) == len(list(gpt.parameters()))
    # the schedule multiplies every group's own rate
    module = LMForgeModule(gpt, resolve_finetune_budget(FinetuneOptimConfig(max_steps=10, batch_size=2, learning_rate=1e-3,
                                                                            warmup_steps=2), 10), layer_decay=0.8)
    opt = module.configure_optimizers()
    first = [g["lr"] for g in opt["optimizer"].param_groups]
    assert first == pytest.approx([g["lr"] * 0.5 for g in groups])  # warmup step 1 of 2


def test_a_decoder_stack_sits_above_the_encoder_and_freezing_embeddings_stops_their_gradients():
    t5 = build_model("t5-tiny", head="seq2seq", vocab_size=64)
    where = placements(t5)
    e = t5.config.n_layers
    assert where["shared.weight"].depth == 0 and where["encoder.layers.0.self_attn.q.weight"].depth == 1
    assert where["decoder.layers.0.self_attn.q.weight"].depth == e + 1
    assert where["lm_head.weight"].role == "head" and where["lm_head.weight"].depth == max(p.depth for p in where.values())

    # a classifier that reads the encoder alone never runs its decoder: the decoder shares the
    # encoder's depths, so the head sits on the encoder's top layer (the top layers to
    # re-initialise, the rates of the layer-wise decay); the default pooling runs it on top
    for arch, preset in (("t5", "t5-tiny"), ("bart", "bart-tiny"), ("switch", "switch-tiny")):
        for pooling, runs in (("mean", False), ("default", True)):
            model = build_model(preset, head="classification", num_labels=3, vocab_size=64, classifier_pooling=pooling)
            assert model.runs_decoder is runs
            where = placements(model)
            enc = {p.depth for n, p in where.items() if ".encoder." in f".{n}" and ".layers." in n}
            dec = {p.depth for n, p in where.items() if ".decoder." in f".{n}" and ".layers." in n}
            heads = {p.depth for p in where.values() if p.role == "head"}
            assert enc == {1, 2}, arch
            assert dec == ({3, 4} if runs else {1, 2}) and heads == {max(dec)}, (arch, pooling)

    bert = build_model("bert-tiny", head="classification", num_labels=2, vocab_size=50, max_positions=16)
    frozen = freeze(bert, ["embeddings"])
    assert frozen and all(n.startswith("encoder.embeddings.") for n in frozen)
    assert all(p.requires_grad != n.startswith("encoder.embeddings.") for n, p in bert.named_parameters())
    assert not any(p.requires_grad is False for g in optimizer_groups(bert, 0.01, 1.0, 0.9) for p in g["params"])
    stack = nn.Module()
    stack.embed, stack.layers = nn.Embedding(5, 4), nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
    assert [p.role for p in placements(stack).values()] == ["embeddings", "layers", "layers", "layers", "layers"]
    with pytest.raises(ValueError, match="no parameter"):
        freeze(stack, ["embeddings", "layers"])


# ----------------------------------------------------------------------------- model selection


class Toy(nn.Module):
    """Mean of token embeddings -> two classes."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(8, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.out(self.embed(input_ids).mean(1))
        return ModelOutput(logits=logits, loss=F.cross_entropy(logits, labels) if labels is not None else None)


class Crash(pl.Callback):
    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("killed")


def _select(tmp_path, script: dict[int, float], *, max_steps: int, patience=None, resume: bool = False,
            crash_at: int | None = None):
    """Train Toy for ``max_steps`` with validation every 2 steps (a checkpoint every 2 steps too);
    the validation metric at step s is ``script[s]``; returns (callback, trainer, module, weights
    at each evaluated step, history)."""
    from lmforge.training.data import ObjectiveDataModule
    from lmforge.training.finetune import ExampleList
    from lmforge.training.finetune_callbacks import BestOnValidation
    from lmforge.training.run import History
    from lmforge.training import run

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    examples = [{"input_ids": rng.integers(0, 8, 5), "labels": np.int64(i % 2)} for i in range(32)]
    optim = resolve_finetune_budget(FinetuneOptimConfig(max_steps=max_steps, batch_size=4, learning_rate=0.05,
                                                        eval_every=2, eval_batches=1), len(examples))
    model = Toy()
    module = LMForgeModule(model, optim)
    data = ObjectiveDataModule(ExampleList(examples), ExampleList(examples[:8]), batch_size=4,
                               micro_steps=optim.max_steps, seed=0, pad_id=0, ordered=False, eval_batches=1,
                               micro_steps_done=lambda: module.micro_steps_done)
    seen: dict[int, dict[str, torch.Tensor]] = {}
    history = History(1)

    def evaluate(m, device):
        step = trainer.global_step
        seen[step] = {k: v.detach().clone() for k, v in m.state_dict().items()}
        return {"accuracy": script[step], "macro_f1": 0.0, "examples": 8}

    selection = BestOnValidation(evaluate, "accuracy", tmp_path / "run" / "checkpoints", every=2, patience=patience,
                                 history=history)
    params = load_params(write_params(tmp_path))
    crash = [Crash(crash_at)] if crash_at else []
    trainer = run.build_trainer(params, optim, tmp_path / "run", [history, selection, *crash], has_validation=True,
                                best_on_loss=False)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    trainer.fit(module, datamodule=data, ckpt_path=str(last) if resume else None, weights_only=True)
    selection.finish(trainer, module, module.device)
    return selection, trainer, module, seen, history


def test_the_best_validation_weights_are_restored_and_ties_keep_the_earlier_step(tmp_path):
    # the metric peaks at step 4 and comes back to the same value at step 8: step 4 wins
    selection, trainer, module, seen, history = _select(tmp_path, {2: 0.5, 4: 0.9, 6: 0.7, 8: 0.9, 10: 0.6}, max_steps=10)
    assert trainer.global_step == 10 and sorted(seen) == [2, 4, 6, 8, 10]
    assert selection.best_step == 4 and selection.best_value == 0.9 and not selection.stopped_early
    restored = module.model.state_dict()
    assert all(torch.equal(restored[k], seen[4][k]) for k in restored)
    assert not all(torch.equal(restored[k], seen[10][k]) for k in restored)
    rows = [r for r in history.rows if "validation/accuracy" in r]
    assert [(r["step"], r["validation/accuracy"]) for r in rows] == [(2, 0.5), (4, 0.9), (6, 0.7), (8, 0.9), (10, 0.6)]
    assert all("val/loss" in r for r in rows)  # one row per evaluation, beside the validation loss


def test_early_stopping_stops_after_patience_evaluations_without_improvement(tmp_path):
    script = {s: v for s, v in zip(range(2, 41, 2), [0.5, 0.8, 0.8, 0.7] + [0.95] * 16)}
    selection, trainer, module, seen, _ = _select(tmp_path, script, max_steps=40, patience=2)
    assert trainer.global_step == 8 < 40 and sorted(seen) == [2, 4, 6, 8]
    assert selection.stopped_early and selection.best_step == 4
    assert all(torch.equal(v, seen[4][k]) for k, v in module.model.state_dict().items())


def test_a_resumed_run_makes_up_the_skipped_evaluation_and_keeps_its_best(tmp_path):
    script = {2: 0.5, 4: 0.9, 6: 0.95, 8: 0.7, 10: 0.6}
    with pytest.raises(RuntimeError, match="killed"):  # stopped at step 7: the last checkpoint is step 6's, saved before its evaluation
        _select(tmp_path, script, max_steps=10, crash_at=7)
    files = sorted(f.name for f in (tmp_path / "run" / "checkpoints").glob("best-step-*"))
    assert files == ["best-step-4.safetensors", "best-step-6.safetensors"]  # step 4: the checkpoint's best
    selection, _, module, after, _ = _select(tmp_path, script, max_steps=10, resume=True)
    assert sorted(after) == [6, 8, 10] and [e["step"] for e in selection.evaluations] == [2, 4, 6, 8, 10]
    assert selection.best_step == 6
    assert all(torch.equal(v, after[6][k]) for k, v in module.model.state_dict().items())
    assert [f.name for f in (tmp_path / "run" / "checkpoints").glob("best-step-*")] == ["best-step-6.safetensors"]


def test_the_last_step_is_scored_when_no_evaluation_fell_on_it(tmp_path):
    selection, trainer, _, seen, _ = _select(tmp_path, {2: 0.5, 4: 0.6, 5: 0.7}, max_steps=5)
    assert sorted(seen) == [2, 4, 5] and selection.best_step == 5


# ----------------------------------------------------------------------------- run_finetune and the control


class FakeTracker:
    """Records what a stage sends to MLflow (no store: fast)."""

    runs: list[FakeTracker] = []

    def __init__(self, run_name: str, tags: dict):
        self.run_name, self.tags, self.run_id = run_name, tags, f"run{len(self.runs)}"
        self.metrics: list[tuple[dict, int | None]] = []
        self.models: list[str] = []
        self.artifacts: list[str] = []
        FakeTracker.runs.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def log_params(self, params):
        pass

    def log_metrics(self, metrics, step=None):
        self.metrics.append((dict(metrics), step))

    def log_artifact(self, path, artifact_path=None):
        self.artifacts.append(Path(path).name)

    def log_dict(self, value, name):
        pass

    def log_model(self, model_dir, name, registered_name=None):
        self.models.append(registered_name)
        return type("Version", (), {"version": 1})()


def test_finetune_selects_on_validation_and_the_scratch_control_matches_it(project, monkeypatch):
    from lmforge.training import finetune
    from lmforge.training.pretrain import run_pretrain

    path = project / "pipelines" / "bert.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["sizes"]["tiny"]["finetune"] = {"epochs": 1, "batch_size": 8, "learning_rate": 0.001, "warmup_ratio": 0.2,
                                           "schedule": "linear", "eval_every": 2, "eval_batches": 1}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project, train={"finetune_max_steps": None}))
    task = str(project / "task")
    initial: list[dict[str, torch.Tensor]] = []

    class Recording(LMForgeModule):
        def __init__(self, model, *args, **kwargs):
            initial.append({k: v.clone() for k, v in model.state_dict().items()})
            super().__init__(model, *args, **kwargs)

    monkeypatch.setattr(finetune, "LMForgeModule", Recording)
    FakeTracker.runs = []
    logs: list[str] = []
    # the control needs no pretrained model: its config comes from the recipe and the tokenizer
    scratch = finetune.run_finetune(params, "bert", task, from_scratch=True, log=logs.append, tracker_factory=FakeTracker)
    run_pretrain(params, "bert", log=logs.append, tracker_factory=FakeTracker)
    pretrained = finetune.run_finetune(params, "bert", task, log=logs.append, tracker_factory=FakeTracker)

    root = project / "models" / "bert"
    assert (scratch["init"], pretrained["init"]) == ("scratch", "pretrained")
    assert json.loads((root / "task-scratch" / "metrics.json").read_text())["init"] == "scratch"
    assert json.loads((root / "task" / "metrics.json").read_text())["init"] == "pretrained"
    for m, folder in ((scratch, "task-scratch"), (pretrained, "task")):
        # 1 epoch of 40 examples at 8: 5 steps; scored at 2, 4 and the last step
        assert m["steps"] == 5 and m["budget"]["max_steps"] == 5 and m["budget"]["warmup_steps"] == 1
        assert m["selection"]["evaluations"] == 3 and m["best_step"] in (2, 4, 5)
        # the restored weights are the best evaluation's: scoring them again gives its value
        assert m["validation"]["accuracy"] == m["best_validation_accuracy"] == m["selection"]["best_value"]
        with open(root / folder / "history.csv", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r["validation/accuracy"]]
        assert [int(r["step"]) for r in rows] == [2, 4, 5] and all(r["validation/macro_f1"] for r in rows)
        # what it cost: 5 steps x 8 examples; a classifier's head never runs over the vocabulary
        c = m["compute"]
        assert c["examples"] == 40 and c["predicted_fraction"] == 0.0 and c["tokens"] > 0 and c["mfu"] is None
        from lmforge.models.flops import flops_per_token
        from lmforge.models.folder import load_model_dir

        classifier = load_model_dir(root / folder / "model")
        assert c["flops"] == pytest.approx(flops_per_token(classifier, c["positions_per_example"], 0.0) * c["tokens"])
        # where its wall time went, phase by phase in the order they ran
        assert list(m["timings"]) == ["setup", "first_step", "training", "best_weights", "scoring", "baselines", "outputs"]
        assert all(t >= 0 for t in m["timings"].values())
    assert sum(1 for line in logs if "finetune bert on task" in line and "(setup " in line and " baselines " in line) == 2
    assert {k: v for k, v in scratch["budget"].items()} == pretrained["budget"]
    assert scratch["fingerprint"] != pretrained["fingerprint"]
    # same architecture and config, none of the pretrained weights
    meta = [json.loads((root / d / "model" / "lmforge_model.json").read_text()) for d in ("task-scratch", "task")]
    assert {k: meta[0][k] for k in ("preset", "head", "num_labels", "config_overrides")} == \
        {k: meta[1][k] for k in ("preset", "head", "num_labels", "config_overrides")}
    scratch_init, pretrained_init = initial
    assert {k: v.shape for k, v in scratch_init.items()} == {k: v.shape for k, v in pretrained_init.items()}
    from lmforge.models.folder import load_model_dir

    backbone = load_model_dir(root / "pretrain" / "model").state_dict()
    shared = sorted(set(backbone) & set(scratch_init))
    assert len(shared) > 20 and all(torch.equal(pretrained_init[k], backbone[k]) for k in shared)
    assert not any(torch.equal(scratch_init[k], backbone[k]) for k in shared)
    # MLflow: tagged by init, validation metrics per step, only the pretrained run registered
    ft_runs = [r for r in FakeTracker.runs if r.tags.get("stage") == "finetune"]
    assert [r.tags["init"] for r in ft_runs] == ["scratch", "pretrained"]
    assert ft_runs[0].run_name.endswith("-scratch") and ft_runs[0].models == [] and ft_runs[1].models == ["lmforge-bert-task"]
    assert "registered_model" not in scratch and pretrained["registered_model"]["name"] == "lmforge-bert-task"
    steps = [s for metrics, s in ft_runs[1].metrics if "validation/accuracy" in metrics and s is not None]
    assert steps == [2, 4, 5]
    # the test split's confusion matrix: in metrics.json, drawn, logged to MLflow, shown by Dagster
    from types import SimpleNamespace

    from lmforge.stages import KINDS
    from lmforge.stages.kind import Image

    for m, folder, run in ((scratch, "task-scratch", ft_runs[0]), (pretrained, "task", ft_runs[1])):
        confusion = m["test_confusion"]
        matrix = confusion["matrix"]  # rows: gold, columns: predicted
        assert confusion["labels"] == ["no", "yes"] and len(matrix) == 2 and all(len(r) == 2 for r in matrix)
        assert sum(map(sum, matrix)) == m["test"]["examples"] == 12 and [sum(r) for r in matrix] == [6, 6]
        assert (matrix[0][0] + matrix[1][1]) / 12 == pytest.approx(m["test"]["accuracy"])
        png = (root / folder / "confusion.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        assert {"loss.png", "confusion.png"} <= set(run.artifacts)
        stage = SimpleNamespace(key={"arch": "bert", "task": "task"})
        shown = KINDS["finetune"].metadata(stage, params, root / folder)
        assert isinstance(shown["confusion"], Image) and shown["confusion"].path == root / folder / "confusion.png"
        assert isinstance(shown["loss_curve"], Image)
    # the control's config read from the pretrained model now is the one it was built with: up to date
    again = finetune.run_finetune(params, "bert", task, from_scratch=True, log=logs.append, tracker_factory=FakeTracker)
    assert again["fingerprint"] == scratch["fingerprint"] and logs[-1].endswith("up to date")


def test_the_cli_flag_runs_the_scratch_control_stages(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from lmforge.cli import main, stages as stage_commands
    from lmforge.stages import build_stages

    seen = []

    def run_stages(params, select=None, force=False):
        graph = build_stages(params, root=tmp_path)
        seen.append(sorted((s.name, s.key["init"]) for s in graph if select(s)))

    monkeypatch.setattr(stage_commands, "_run_stages", run_stages)
    params = write_params(tmp_path)
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines")
    monkeypatch.chdir(tmp_path)
    for args in (["--from-scratch"], []):
        res = CliRunner().invoke(main, ["finetune", "bert", "--params", str(params), *args])
        assert res.exit_code == 0, res.output
    assert [[init for _, init in stages] for stages in seen] == [["scratch"], ["pretrained"]]
    assert seen[0][0][0].startswith("finetune_scratch_bert_")


@pytest.mark.parametrize("preset", ["t5-tiny", "bart-tiny", "switch-tiny"])
def test_candidate_scores_encode_once_and_equal_the_full_forward(preset):
    """Text-to-text classification scores each label's target by its summed log-likelihood;
    encoding the inputs once and decoding per candidate gives what a whole forward pass with
    that target as labels gives."""
    torch.manual_seed(0)
    model = build_model(preset, vocab_size=64).eval()
    input_ids = torch.randint(4, 60, (3, 9))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0  # a padded input
    candidates = {2: [9, 11, 1], 0: [7, 1, -100], 1: [13, 8, 1]}  # class id -> target ids (-100: not scored)
    with torch.no_grad():
        scores = candidate_scores(model, input_ids, attention_mask, candidates)
        expected = torch.stack([
            -F.cross_entropy(model(input_ids=input_ids, attention_mask=attention_mask,
                                   labels=torch.tensor(candidates[c]).expand(3, -1)).logits.transpose(1, 2),
                             torch.tensor(candidates[c]).expand(3, -1), reduction="none").sum(-1)
            for c in sorted(candidates)], dim=1)
    assert scores.shape == (3, 3)
    torch.testing.assert_close(scores, expected)
    assert len({tuple(row) for row in scores.tolist()}) == 3  # the inputs are told apart


def test_augmentation_adds_examples_to_training_only(project):
    """``finetune.augment``: the masked LM's copies join the training examples (the budget counts
    them), while the task summary and the baselines stay the task's own; without the masked LM's
    pretrained model it is one clear error."""
    from lmforge.config import ConfigError
    from lmforge.finetuning.classification import baselines
    from lmforge.finetuning.tasks import load_task
    from lmforge.training import finetune
    from lmforge.training.pretrain import run_pretrain

    path = project / "pipelines" / "bert.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["finetune"]["augment"] = {"copies": 1, "rate": 0.2, "model": "bert"}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    params = load_params(write_params(project))
    task = str(project / "task")
    with pytest.raises(ConfigError, match="augmentation needs the pretrained bert"):
        finetune.run_finetune(params, "bert", task, from_scratch=True, log=lambda m: None, tracker_factory=FakeTracker)
    run_pretrain(params, "bert", log=lambda m: None, tracker_factory=FakeTracker)
    logs: list[str] = []
    metrics = finetune.run_finetune(params, "bert", task, log=logs.append, tracker_factory=FakeTracker)
    assert any("40 augmented training examples" in line for line in logs)
    assert metrics["budget"]["train_examples"] == 80
    assert metrics["task_summary"]["splits"]["train"]["examples"] == 40
    own = load_task(task, params, seed=params.train.seed, max_train=params.finetune.max_train_examples)
    assert metrics["baselines"]["bag_of_words"] == baselines.bag_of_words_baseline(own, seed=params.train.seed)


def test_f1_selection_needs_a_two_label_task(project):
    """``finetune.metric: f1`` (the positive label's, MRPC / QQP-style) on a three-label task is
    one clear error before any training; set here for one run, as `--set <recipe>:key=value`."""
    from lmforge.config import ConfigError
    from lmforge.training import finetune

    task = project / "three"
    task.mkdir()
    for split in ("train", "validation", "test"):
        rows = "".join(f"text number {i},{'abc'[i % 3]}\n" for i in range(12))
        (task / f"{split}.csv").write_text("sentence,label\n" + rows, encoding="utf-8")
    params = load_params(write_params(project), [f"{project / 'pipelines' / 'bert.yaml'}:finetune.metric=f1"])
    with pytest.raises(ConfigError, match="f1 is the positive label's, for two-label tasks; three has 3 labels"):
        finetune.run_finetune(params, "bert", str(task), from_scratch=True, log=lambda m: None, tracker_factory=FakeTracker)


def test_best_weights_are_saved_and_restored_when_parameters_are_views_of_one_buffer(tmp_path):
    """On a GPU cuDNN packs an LSTM's weights into one buffer, each parameter a view of part of it;
    safetensors' save_model refuses that (the ELMo fine-tuning failed so on an H100). Two views
    of one buffer stand in for it here, and a tied pair for GPT's tied embedding."""
    import torch
    from torch import nn

    from lmforge.training.finetune_callbacks import load_weights, save_weights

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            flat = torch.arange(12.0)
            self.a = nn.Parameter(flat[:4])
            self.b = nn.Parameter(flat[4:10])  # views of one 12-element storage, not covering it
            self.emb = nn.Linear(3, 2, bias=False)
            self.out = nn.Linear(3, 2, bias=False)
            self.out.weight = self.emb.weight  # tied

    from safetensors.torch import save_model

    model = Packed()
    with pytest.raises(RuntimeError, match="save state dict"):
        save_model(model, str(tmp_path / "refused.safetensors"))
    save_weights(model, tmp_path / "w.safetensors")
    other = Packed()
    with torch.no_grad():
        for p in other.parameters():
            p.zero_()
    load_weights(other, tmp_path / "w.safetensors")
    assert torch.equal(other.a, torch.arange(4.0)) and torch.equal(other.b, torch.arange(4.0, 10.0))
    assert torch.equal(other.emb.weight, model.emb.weight) and other.out.weight is other.emb.weight
