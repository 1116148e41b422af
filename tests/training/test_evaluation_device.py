"""After ``fit`` Lightning's teardown moves the model to the CPU; the stages' own evaluations after
it (the pretraining's final validation pass, the fine-tuning's best-weights scoring and test
split) run on the device the run trained on (``run.evaluation_device``), not on the CPU the
teardown left the model on. On a CPU the two are told apart by the index of the device the
evaluation is given (``cpu:0`` from the patched ``evaluation_device``, plain ``cpu`` from the
model after the teardown)."""

from __future__ import annotations

import torch

from lmforge.config import load_params

from .conftest import write_params

TRAINED_ON = torch.device("cpu", 0)


def test_the_pretraining_evaluates_its_final_weights_on_the_device_it_trained_on(project, monkeypatch):
    from lmforge.training import pretrain

    seen: list[torch.device] = []
    evaluate = pretrain.evaluate_lm

    def recording(model, batches, objective, **kwargs):
        seen.append(kwargs["device"])
        return evaluate(model, batches, objective, **kwargs)

    monkeypatch.setattr(pretrain, "evaluate_lm", recording)
    monkeypatch.setattr(pretrain, "evaluation_device", lambda cfg: TRAINED_ON)
    params = load_params(write_params(project, train={"max_steps": 3, "checkpoint_every": 100}, tracking={"enabled": False}))
    metrics = pretrain.run_pretrain(params, "gpt", log=lambda line: None)
    assert seen == [TRAINED_ON, TRAINED_ON]  # the untrained model's pass and the final one
    assert metrics["steps"] == 3 and metrics["timings"]["final_evaluation"] >= 0


def test_the_fine_tuning_scores_its_best_weights_on_the_device_it_trained_on(project, monkeypatch):
    from lmforge.training import finetune

    seen: list[torch.device] = []
    record = finetune.finetune_metrics

    def recording(plan, **kwargs):
        seen.append(kwargs["device"])
        return record(plan, **kwargs)

    monkeypatch.setattr(finetune, "finetune_metrics", recording)
    monkeypatch.setattr(finetune, "evaluation_device", lambda cfg: TRAINED_ON)
    params = load_params(write_params(project, train={"finetune_max_steps": 3, "checkpoint_every": 100},
                                      tracking={"enabled": False}))
    metrics = finetune.run_finetune(params, "gpt", str(project / "task"), from_scratch=True, log=lambda line: None)
    assert seen == [TRAINED_ON]
    assert metrics["test"]["accuracy"] >= 0
