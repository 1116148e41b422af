"""Data-quality checks (lmforge.checks): they fail on planted bad outputs, pass on good ones,
report a missing output as failed outcomes, and pass on what the real stages write."""

from __future__ import annotations

import json
import math
import pytest

from lmforge.stages import CHECKS, run_checks
from lmforge.config import load_params
from lmforge.stages import build_stages

from .conftest import graph_project, write_params

SECTIONS = {"tokenizer": {"kinds": ["bpe", "wordpiece", "unigram", "char"]}, "dataset": {"objectives": ["clm", "mlm", "span_corruption"]},
            "train": {"architectures": ["gpt"]}}


@pytest.fixture
def checked(graph_root):
    """``check(stage_name, {relative path: content})``: write the files under the project, run
    the stage's checks, return {check name: outcome} (and assert the outcomes are the declared ones)."""
    params = graph_project(graph_root, **SECTIONS)
    graph = build_stages(params, root=graph_root)

    def check(name: str, files: dict[str, object] | None = None, **checks) -> dict:
        p = params.model_copy(update={"checks": params.checks.model_copy(update=checks)}) if checks else params
        for rel, content in (files or {}).items():
            path = graph_root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        stage = graph[name]
        outcomes = run_checks(stage, p, graph_root)
        specs = CHECKS[stage.kind]
        assert [o.name for o in outcomes] == [s.name for s in specs]  # what an orchestrator declared up front
        assert [o.severity for o in outcomes] == [s.severity for s in specs]
        assert all(o.description for o in outcomes)
        return {o.name: o for o in outcomes}

    return check


def passed(outcomes: dict) -> dict[str, bool]:
    return {name: o.passed for name, o in outcomes.items()}


def clean_stats(n_in: int, n_out: int, **dropped: int) -> dict:
    return {"documents_in": n_in, "documents_out": n_out,
            "dropped": {reason: {"documents": n, "bytes": 100 * n} for reason, n in dropped.items()}}


@pytest.mark.parametrize("stats, expected", [
    (clean_stats(1000, 600, too_few_sentences=300, language=100), {"not_empty": True, "drop_rates": True, "decontaminated": True}),
    (clean_stats(1000, 0, too_few_sentences=1000), {"not_empty": False, "drop_rates": False, "decontaminated": True}),
    (clean_stats(120, 50, language=70), {"not_empty": False, "drop_rates": True, "decontaminated": True}),   # fewer than 100 kept
    (clean_stats(10000, 300, language=9700), {"not_empty": True, "drop_rates": False, "decontaminated": True}),  # kept 3% < 5%
    (clean_stats(1000, 150, language=850), {"not_empty": True, "drop_rates": False, "decontaminated": True}),  # one reason drops 85% > 80%
])
def test_clean(checked, stats, expected):
    outcomes = checked("clean", {"data/clean/stats.json": stats})
    assert passed(outcomes) == expected
    assert outcomes["drop_rates"].metadata["kept_fraction"] == pytest.approx(stats["documents_out"] / stats["documents_in"])


def test_clean_bounds_come_from_params(checked):
    stats = {"data/clean/stats.json": clean_stats(1000, 600, language=400)}
    assert passed(checked("clean", stats, clean_min_documents=601, clean_max_reason_fraction=0.3)) == {
        "not_empty": False, "drop_rates": False, "decontaminated": True}


@pytest.mark.parametrize("after, documents_after, expected", [(0, 0, True), (2, 0, False), (0, 1, False)])
def test_clean_decontaminated(checked, after, documents_after, expected):
    """Fails when an evaluation example still overlaps a training document, or a document is left
    that overlaps one; a task that could not be built is not counted."""
    summary = {"evaluation_windows": 500, "training_documents_overlapping": 7,
               "training_documents_overlapping_after": documents_after,
               "tasks": {"docstring_kind": {"validation": [107, 4, 0], "test": [119, 12, after]},
                         "docstring_qa": {"skipped": "no metadata"}}}
    outcome = checked("clean", {"data/clean/stats.json": {**clean_stats(1000, 600), "decontamination": summary}})
    assert outcome["decontaminated"].passed is expected
    assert outcome["decontaminated"].metadata["documents_removed"] == 7
    assert "docstring_kind: 12 of 119" in outcome["decontaminated"].description
    if after:
        assert outcome["decontaminated"].metadata["still_overlapping_docstring_kind/test"] == after


def test_tokenizer_unknown_rate(checked):
    assert checked("tokenizer_bpe", {"data/tokenizers/bpe/metrics.json": {"unknown_rate": 0.001}})["unknown_rate"].passed
    assert not checked("tokenizer_bpe", {"data/tokenizers/bpe/metrics.json": {"unknown_rate": 0.05}})["unknown_rate"].passed
    # ELMo's char tokenizer has its own bound (words outside the output vocabulary)
    assert checked("tokenizer_char", {"data/tokenizers/char/metrics.json": {"unknown_rate": 0.05}})["unknown_rate"].passed
    assert not checked("tokenizer_char", {"data/tokenizers/char/metrics.json": {"unknown_rate": 0.2}})["unknown_rate"].passed


@pytest.mark.parametrize("splits, ok", [
    ({"train": {"documents": 220, "tokens": 64000}, "validation": {"documents": 8, "tokens": 2000}}, True),
    ({"train": {"documents": 0, "tokens": 0}, "validation": {"documents": 8, "tokens": 2000}}, False),
    ({"validation": {"documents": 8, "tokens": 2000}}, False),
])
def test_token_store_train_split(checked, splits, ok):
    assert checked("tokens_bpe", {"data/tokens/bpe/manifest.json": {"splits": splits}})["train_not_empty"].passed is ok


@pytest.mark.parametrize("objective, train, ok", [
    ("mlm", {"examples_per_epoch": 500, "mask_rate": 0.151}, True),
    ("mlm", {"examples_per_epoch": 500, "mask_rate": 0.30}, False),        # far from the configured 0.15
    ("mlm", {"examples_per_epoch": 500, "mask_rate": 0.12}, False),
    ("mlm", {"examples_per_epoch": 500}, False),                           # the statistic is missing
    ("mlm", {"examples_per_epoch": 0, "mask_rate": 0.15}, False),          # nothing to train on
    ("span_corruption", {"examples_per_epoch": 500, "noise_fraction": 0.16}, True),
    ("span_corruption", {"examples_per_epoch": 500, "noise_fraction": 0.5}, False),
    ("clm", {"examples_per_epoch": 500}, True),                            # no rate to compare
])
def test_objective_statistics(checked, objective, train, ok):
    outcome = checked(f"dataset_{objective}", {f"data/datasets/{objective}/stats.json": {"splits": {"train": train}}})
    assert outcome["objective_statistics"].passed is ok, outcome["objective_statistics"].description


def history(*losses: float, column: str = "train/loss") -> str:
    rows = [f"{i + 1},0.001,{'' if x is None else x}," for i, x in enumerate(losses)]
    return "\n".join([f"step,lr,{column},val/loss", *rows]) + "\n"


@pytest.mark.parametrize("losses, ok", [
    ((6.0, 5.8, None, 5.1), True),   # rows without a training loss (validation only) are skipped
    ((6.0, math.nan, 5.0), False),
    ((6.0, math.inf, 5.0), False),
    ((5.0, 5.5, 6.0), False),        # increasing
    ((5.0, 5.0), False),             # flat
    ((), False),                     # nothing logged
])
def test_pretraining_loss(checked, losses, ok):
    outcome = checked("pretrain_gpt", {"models/gpt/pretrain/history.csv": history(*losses)})
    assert outcome["loss_finite_and_decreasing"].passed is ok, outcome["loss_finite_and_decreasing"].description


def test_pretraining_loss_min_drop(checked):
    files = {"models/gpt/pretrain/history.csv": history(6.0, 5.9)}
    assert checked("pretrain_gpt", files)["loss_finite_and_decreasing"].passed
    assert not checked("pretrain_gpt", files, loss_min_drop=0.5)["loss_finite_and_decreasing"].passed


def test_finetuning_loss(checked):
    path = "models/gpt/task/history.csv"
    assert checked("finetune_gpt_task", {path: history(0.7, 0.8)})["loss_finite"].passed  # finite is enough
    assert not checked("finetune_gpt_task", {path: history(0.7, math.nan)})["loss_finite"].passed


def evaluation(loss: float, unigram: float, accuracy: float, majority: float) -> dict:
    return {"pretrain": {"validation": {"loss": loss, "unigram_loss": unigram}},
            "finetune": {"task": {"test": {"accuracy": accuracy}, "baselines": {"majority": {"accuracy": majority}}}}}


def with_scratch(ev: dict, accuracy: float) -> dict:
    ev["finetune"]["task"]["scratch"] = {"test": {"accuracy": accuracy}}
    return ev


def tagging(f1: float, most_frequent: float, scratch: float) -> dict:
    """An evaluation whose task is a tagging one: judged on entity F1, its accuracy irrelevant."""
    return {"pretrain": {"validation": {"loss": 4.0, "unigram_loss": 4.7}},
            "finetune": {"task": {"family": "tagging", "test": {"f1": f1, "accuracy": 0.0},
                                  "baselines": {"most_frequent_tag": {"f1": most_frequent}},
                                  "scratch": {"test": {"f1": scratch, "accuracy": 1.0}}}}}


@pytest.mark.parametrize("ev, expected", [
    (evaluation(4.0, 4.7, 0.8, 0.5), {"beats_unigram_baseline": True, "beats_majority_baseline": True,
                                      "beats_scratch_control": False}),  # no control: nothing shows transfer
    (evaluation(5.7, 4.7, 0.8, 0.5), {"beats_unigram_baseline": False, "beats_majority_baseline": True,
                                      "beats_scratch_control": False}),
    (evaluation(4.0, 4.7, 0.5, 0.5), {"beats_unigram_baseline": True, "beats_majority_baseline": False,
                                      "beats_scratch_control": False}),
    ({"pretrain": {"validation": {"loss": 4.0}}}, {"beats_unigram_baseline": False, "beats_majority_baseline": False,
                                                   "beats_scratch_control": False}),
    (with_scratch(evaluation(4.0, 4.7, 0.8, 0.5), 0.7), {"beats_unigram_baseline": True, "beats_majority_baseline": True,
                                                         "beats_scratch_control": True}),
    (with_scratch(evaluation(4.0, 4.7, 0.8, 0.5), 0.8), {"beats_unigram_baseline": True, "beats_majority_baseline": True,
                                                         "beats_scratch_control": False}),  # a tie is no gain
    (tagging(0.6, 0.4, 0.5), {"beats_unigram_baseline": True, "beats_majority_baseline": True,
                              "beats_scratch_control": True}),
    (tagging(0.3, 0.4, 0.5), {"beats_unigram_baseline": True, "beats_majority_baseline": False,
                              "beats_scratch_control": False}),
])
def test_evaluation_baselines(checked, ev, expected):
    outcomes = checked("evaluate_gpt", {"data/report/evaluation/gpt.json": ev})
    assert passed(outcomes) == expected


@pytest.mark.parametrize("name", ["clean", "tokenizer_bpe", "tokens_bpe", "dataset_mlm", "pretrain_gpt",
                                  "finetune_gpt_task", "evaluate_gpt"])
def test_a_missing_or_unreadable_output_fails_every_check(checked, graph_root, name):
    outcomes = checked(name)  # nothing written
    assert not any(o.passed for o in outcomes.values())
    assert all("could not read" in o.description and "missing" in o.description for o in outcomes.values())
    # a file that is there but not what the stage writes fails the same way, without raising
    stage_out = build_stages(graph_project(graph_root, **SECTIONS), root=graph_root)[name].paths[0]
    target = {"clean": "stats.json", "tokenizer_bpe": "metrics.json", "tokens_bpe": "manifest.json",
              "dataset_mlm": "stats.json", "pretrain_gpt": "history.csv", "finetune_gpt_task": "history.csv"}.get(name)
    rel = f"{stage_out}/{target}" if target else stage_out
    garbage = "step,lr,train/loss\n1,0.1,not-a-number\n" if rel.endswith(".csv") else "{not json"
    assert not any(o.passed for o in checked(name, {rel: garbage}).values())


def test_the_report_has_no_checks(checked):
    assert checked("report") == {}


def test_checks_pass_on_what_the_stages_write(project):
    """The real clean corpus, tokenizers, token stores and objective datasets of the tiny project:
    every check passes, so the checks read the files the stages actually write.

    BART's denoising runs at its default length here: at 32 tokens its realised masked fraction
    is about 0.34 for the configured 0.30 (0.31 at 128), outside the check's 0.02 tolerance."""
    params = load_params(write_params(project, dataset={"denoising": {"max_length": 128}}))
    graph = build_stages(params, root=project)
    data_stages = [s for s in graph if s.kind in ("clean", "tokenizer", "tokens", "dataset")]
    assert {s.name for s in data_stages if s.kind == "dataset"} == {f"dataset_{o}" for o in params.dataset.objectives}
    for stage in data_stages:
        if stage.kind == "dataset":
            stage.run(params, lambda m: None)
        outcomes = run_checks(stage, params, project)
        assert outcomes and all(o.passed for o in outcomes), (stage.name, [(o.name, o.description) for o in outcomes])


def test_a_transfer_loss_after_a_plateaued_pretraining_is_called_too_short_to_pay(checked):
    """The scratch-control check still warns, and says why the loss is no finding when the
    pretraining ended within 0.25 nats of its unigram baseline; off the plateau it says nothing more."""
    on_plateau = with_scratch(evaluation(4.6, 4.7, 0.6, 0.5), 0.8)
    outcome = checked("evaluate_gpt", {"data/report/evaluation/gpt.json": on_plateau})["beats_scratch_control"]
    assert not outcome.passed and outcome.description.startswith("too short to pay: the pretraining ended 0.100 nats")
    off = with_scratch(evaluation(4.0, 4.7, 0.6, 0.5), 0.8)
    outcome = checked("evaluate_gpt", {"data/report/evaluation/gpt.json": off})["beats_scratch_control"]
    assert not outcome.passed and outcome.description.startswith("task: transfer gain -0.200")
