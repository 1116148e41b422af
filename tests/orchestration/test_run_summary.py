"""What ``python -m dagster_project.run`` prints at its end: step times, slowest first, and the
leaderboard's headline columns."""

from __future__ import annotations

from types import SimpleNamespace

from dagster_project.summary import clock, closing_lines, leaderboard_lines, step_lines, step_seconds


def entry(kind: str, step: str | None, at: float):
    return SimpleNamespace(timestamp=at, dagster_event=SimpleNamespace(event_type_value=kind, step_key=step))


def test_step_seconds_run_from_the_first_start_to_the_end():
    log = [entry("RUN_START", None, 0.0), entry("STEP_START", "clean", 1.0), entry("STEP_OUTPUT", "clean", 2.0),
           entry("STEP_SUCCESS", "clean", 31.5), entry("STEP_START", "pretrain_gpt", 32.0),
           entry("STEP_START", "pretrain_gpt", 40.0),  # a retry's start: the step began at the first
           entry("STEP_FAILURE", "pretrain_gpt", 152.0), entry("STEP_START", "report", 153.0),  # never ended
           SimpleNamespace(timestamp=5.0, dagster_event=None)]
    assert step_seconds(log) == {"clean": 30.5, "pretrain_gpt": 120.0}
    assert step_lines(step_seconds(log)) == ["steps: 2, 2 min 30 s of step time; the slowest: "
                                             "pretrain_gpt 2 min 00 s, clean 30 s"]
    assert step_lines({}) == [] and clock(59.6) == "1 min 00 s" and clock(3) == "3 s"


def test_the_leaderboard_headline_is_a_plain_table(tmp_path):
    (tmp_path / "leaderboard.csv").write_text(
        "architecture,task,task_accuracy,scratch_accuracy,transfer_gain,transfer,harness_acc,harness_floor_acc,val_loss\n"
        "gpt,docstring_kind,0.6891,0.64,0.0491,pays,0.41,0.25,3.2\n"
        "bert,docstring_kind,0.6,0.667,-0.067,too short to pay,,,4.1\n")
    lines = leaderboard_lines(tmp_path)
    assert lines[0] == f"leaderboard ({tmp_path / 'leaderboard.md'}; every column explained there):"
    assert lines[1].split() == ["architecture", "task", "task_accuracy", "scratch_accuracy", "transfer_gain",
                                "transfer", "harness_acc", "harness_floor_acc"]
    assert lines[2].split() == ["gpt", "docstring_kind", "0.689", "0.640", "0.049", "pays", "0.410", "0.250"]
    assert lines[3].split() == ["bert", "docstring_kind", "0.600", "0.667", "-0.067", "too", "short", "to", "pay"]
    assert leaderboard_lines(tmp_path / "missing") == []
    out = closing_lines(tmp_path, tmp_path, {"clean": 3.0}, 75.0)
    assert out[0] == "wall time: 1 min 15 s" and out[1].startswith("steps: 1, 3 s") and out[2] == lines[0]
    assert out[-1].startswith("look at it: `make ui`")
    assert closing_lines(tmp_path, None, {}, 1.0) == ["wall time: 1 s", out[-1]]
