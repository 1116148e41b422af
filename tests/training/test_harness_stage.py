"""The evaluate stage with ``evaluate.harness``: docstring_next built from the held-out documents,
GPT and its untrained floor scored through lm-eval (equal to our own scorer on the same questions),
the masked-LM encoders listed as not applicable, the scores in the stage's record."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

import pytest
import torch

from lmforge import layout
from lmforge.errors import ConfigError
from lmforge.evaluation.harness import Question, score_questions
from lmforge.inference.loading import load
from lmforge.models.registry import build_model
from lmforge.splits import split_of
from lmforge.evaluation.stage import run_evaluate
from lmforge.evaluation.zero_shot import default_task, harness_scores, scorer, task_dir, untrained_twin

from ..finetuning.conftest import corpus  # noqa: F401  (the session fixture)
from ..inference.conftest import write_model

pytest.importorskip("lm_eval")

ARCHS = ["gpt", "bert", "t5", "xlnet", "bart"]


@pytest.fixture()
def project(corpus, tmp_path):  # noqa: F811
    params, docs = corpus
    params = params.model_copy(update={
        "train": params.train.model_copy(update={"output": str(tmp_path / "models"), "architectures": ARCHS}),
        "evaluate": params.evaluate.model_copy(update={"output": str(tmp_path / "report"),
                                                       "harness": ["docstring_next"], "harness_questions": 6}),
        "finetune": params.finetune.model_copy(update={"tasks": []}),
        "tracking": params.tracking.model_copy(update={"register_models": False}),
    })
    for arch in ARCHS:
        write_model(params, arch, layout.pretrained_model_dir(params, arch), seed=11)
        (layout.pretrain_dir(params, arch) / "metrics.json").write_text(json.dumps(
            {"architecture": arch, "validation": {"loss": 5.0, "unigram_loss": 6.0}}))
    return params, docs


class Tracker:
    def __init__(self):
        self.metrics = {}

    def log_metrics(self, m):
        self.metrics.update(m)

    def log_dict(self, d, name):
        pass


def test_the_default_task_comes_from_the_held_out_documents(project):
    params, docs = project
    rows = [json.loads(line) for line in default_task(params).with_suffix(".jsonl").read_text().splitlines()]
    assert len(rows) == 6
    held_out = "\n".join(t for i, t, _ in docs if split_of(i, params.split) == "validation")
    trained = "\n".join(t for i, t, _ in docs if split_of(i, params.split) == "train")
    for r in rows:
        assert r["context"] in held_out and r["choices"][r["gold"]] in held_out
        assert r["context"] not in trained


def test_the_evaluate_stage_scores_each_generative_model_and_its_untrained_floor(project):
    params, _ = project
    trackers = {}

    @contextmanager
    def factory(run_name, tags):
        trackers[run_name] = Tracker()
        yield trackers[run_name]

    results = run_evaluate(params, ARCHS, log=lambda m: None, tracker_factory=factory)
    rows = [json.loads(line) for line in default_task(params).with_suffix(".jsonl").read_text().splitlines()]
    questions = [Question(r["context"], tuple(r["choices"]), r["gold"]) for r in rows]
    for arch in ("gpt", "t5", "xlnet"):
        record = json.loads(layout.evaluation_file(params, arch).read_text())
        assert record["harness"] == results[arch]["harness"]
        h = record["harness"]
        assert h["tasks"] == ["docstring_next"] and set(h) == {"tasks", "scored_by", "pretrained", "untrained"}
        assert h["scored_by"].startswith("lm-eval 0.4.")
        # the same numbers from our own scorer, with no lm-eval in between
        loaded = load(layout.pretrained_model_dir(params, arch))
        for name, model in (("pretrained", loaded.model), ("untrained", untrained_twin(loaded, params.train.seed))):
            ours = score_questions(scorer(model, loaded.tokenizer, arch), questions)
            got = h[name]["docstring_next"]
            assert got["n"] == 6
            assert {k: got[k] for k in ("acc", "acc_norm", "acc_bytes")} == pytest.approx(
                {k: ours[k] for k in ("acc", "acc_norm", "acc_bytes")})
            assert trackers[f"evaluate-{arch}"].metrics[f"harness/docstring_next/{name}/acc"] == pytest.approx(got["acc"])
    bert = json.loads(layout.evaluation_file(params, "bert").read_text())["harness"]
    assert bert == {"tasks": ["docstring_next"],
                    "not_applicable": "a masked-LM encoder: it gives no left-to-right log-likelihood of a continuation"}


def test_the_untrained_floor_is_the_architecture_with_the_controls_seed(project):
    params, _ = project
    loaded = load(layout.pretrained_model_dir(params, "gpt"))
    twin = untrained_twin(loaded, params.train.seed)
    torch.manual_seed(params.train.seed)
    fresh = build_model(loaded.meta["preset"], head=loaded.meta["head"], **loaded.meta["config_overrides"])
    for (name, a), b in zip(twin.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    # not the "pretrained" weights (written from seed 11)
    assert params.train.seed != 11
    assert not all(torch.equal(a, b) for a, b in zip(twin.parameters(), loaded.model.parameters()))


def test_without_lm_eval_the_built_in_task_is_scored_by_our_own_scorer(project, monkeypatch):
    params, _ = project
    with_lm_eval = harness_scores(params, "t5", log=lambda m: None)
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    without = harness_scores(params, "t5", log=lambda m: None)
    assert without["scored_by"] == "lmforge (lm-eval's definitions; lm-eval not installed)"
    for name in ("pretrained", "untrained"):
        got, ref = without[name]["docstring_next"], with_lm_eval[name]["docstring_next"]
        assert got["n"] == ref["n"] == 6
        assert {k: got[k] for k in ("acc", "acc_norm", "acc_bytes")} == pytest.approx(
            {k: ref[k] for k in ("acc", "acc_norm", "acc_bytes")})


def test_without_lm_eval_another_task_stops_with_one_line_before_reading_anything(project, monkeypatch):
    params, _ = project
    params = params.model_copy(update={"evaluate": params.evaluate.model_copy(update={"harness": ["docstring_next",
                                                                                                  "hellaswag"]})})
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    with pytest.raises(ConfigError) as err:
        harness_scores(params, "gpt", log=lambda m: None)
    assert str(err.value) == ("evaluate.harness: task 'hellaswag' needs EleutherAI's lm-eval, which is not installed: "
                              "pip install 'lmforge[eval]' (the built-in docstring_next is scored without it)")
    assert not task_dir(params).exists()


def test_a_corpus_too_small_for_the_default_task_skips_it_and_says_why(project, monkeypatch):
    params, _ = project
    from lmforge.evaluation import harness_task
    from lmforge.evaluation.report.leaderboard import _harness_row

    monkeypatch.setattr(harness_task, "next_sentence_questions", lambda *a, **k: [])
    messages = []
    got = harness_scores(params, "gpt", log=messages.append)
    reason = "docstring_next: no questions (the held-out documents have too few two-sentence paragraphs)"
    assert got == {"tasks": ["docstring_next"], "skipped": {"docstring_next": reason}}
    assert messages == [f"evaluate gpt: harness skips docstring_next ({reason})"]
    assert _harness_row(got)["harness_task"] == "skipped"


@pytest.mark.parametrize("arch", ["t5", "bart"])
def test_an_exported_encoder_decoder_scores_as_the_folder_it_came_from(project, tmp_path, arch):
    from click.testing import CliRunner

    from lmforge.cli import main
    from lmforge.evaluation.zero_shot import folder_scorer

    params, _ = project
    folder = layout.pretrained_model_dir(params, arch)
    done = CliRunner().invoke(main, ["export", str(folder), str(tmp_path / "hf")])
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in default_task(params).with_suffix(".jsonl").read_text().splitlines()]
    pairs = [(r["context"], " " + c) for r in rows for c in r["choices"]]
    ours, theirs = (folder_scorer(f).loglikelihood(pairs) for f in (folder, tmp_path / "hf"))
    assert [x[0] for x in ours] == pytest.approx([x[0] for x in theirs], abs=1e-4)
    assert [x[1] for x in ours] == [x[1] for x in theirs]


def test_a_question_the_model_cannot_read_skips_the_task_and_the_stage_goes_on(project, monkeypatch):
    """GPT reads at most n_positions tokens: a continuation longer than that is skipped, said why."""
    params, _ = project
    from lmforge.evaluation import harness_task

    long = " ".join(["word"] * 400)
    rows = [{"context": "First.", "choices": [long, "b c d.", "e f g.", "h i j."], "gold": 0}] * 4
    monkeypatch.setattr(harness_task, "next_sentence_questions", lambda *a, **k: rows)
    messages = []
    got = harness_scores(params, "gpt", log=messages.append)
    assert set(got) == {"tasks", "skipped"} and "longer than the" in got["skipped"]["docstring_next"]
    assert messages and messages[0].startswith("evaluate gpt: harness skipped (a continuation of ")
