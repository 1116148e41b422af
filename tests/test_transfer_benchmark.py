"""benchmarks/transfer.py without training: its arithmetic and table on fixed numbers, and the
one-line errors (exit status 2) for bad arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import load_benchmark


def _load():
    return load_benchmark("transfer")


@pytest.fixture(scope="module")
def transfer():
    return _load()


def run(arch: str, task: str, seed: int, pre: float, scratch: float, majority: float = 0.5, bow: float = 0.7) -> dict:
    """A per-seed record as the script builds it from two metrics.json (test macro-F1 = accuracy - 0.1)."""
    def metrics(acc: float, best: int) -> dict:
        return {"test": {"accuracy": acc, "macro_f1": acc - 0.1}, "validation": {"accuracy": acc, "macro_f1": acc},
                "best_step": best, "steps": 100, "seconds": 10.0 + seed,
                "baselines": {"majority": {"accuracy": majority}, "bag_of_words": {"accuracy": bow}}}
    transfer = _load()
    return transfer.record(arch, task, seed, metrics(pre, 40), metrics(scratch, 90))


def test_mean_and_sample_sd(transfer):
    assert transfer.mean_sd([70.0, 72.0, 74.0]) == (72.0, 2.0)  # sample sd: n - 1
    assert transfer.mean_sd([61.5]) == (61.5, None)
    assert transfer.pm([70.0, 72.0, 74.0]) == "72.0 ± 2.0"
    assert transfer.pm([3.25], signed=True) == "+3.2"
    assert transfer.pm([-1.0, -3.0], signed=True) == "-2.0 ± 1.4"


def test_rows_gain_and_pays(transfer):
    runs = [
        # gpt: +10, +12, +8 points -> mean 10 > 3 and > sd 2: pays
        run("gpt", "t", 0, 0.80, 0.70), run("gpt", "t", 1, 0.82, 0.70), run("gpt", "t", 2, 0.78, 0.70),
        # bert: +4, -4, +12 -> mean 4 > 3 but sd 8: does not pay
        run("bert", "t", 0, 0.74, 0.70), run("bert", "t", 1, 0.66, 0.70), run("bert", "t", 2, 0.82, 0.70),
    ]
    gpt, bert = transfer.summarize(runs)
    assert (gpt["architecture"], gpt["seeds"]) == ("gpt", [0, 1, 2])
    assert gpt["gain"] == pytest.approx(10.0) and gpt["gain_sd"] == pytest.approx(2.0) and gpt["pays"]
    assert bert["gain"] == pytest.approx(4.0) and bert["gain_sd"] == pytest.approx(8.0) and not bert["pays"]
    assert gpt["best_step"] == (40, 90) and gpt["seconds"] == (11.0, 11.0)

    table = transfer.format_table([gpt, bert]).splitlines()
    assert len(table) == 4 and all(line.count("|") == 13 for line in table)
    assert table[2].startswith("| gpt | t | 50.0 | 70.0 | 80.0 ± 2.0 | 70.0 ± 0.0 | +10.0 ± 2.0 | yes | "
                               "70.0 ± 2.0 |")
    assert "| 40 / 90 of 100 | 11 / 11 |" in table[2]
    assert "| +4.0 ± 8.0 | no |" in table[3]

    # gpt beats majority (50) by >= 5 and reaches bag of words (70); bert's mean 74 does both too
    assert transfer.summary_lines([gpt, bert]) == [
        "t: fine-tuned from pretraining, 2/2 architectures beat the majority class by >= 5 points and 2/2 reach "
        "bag of words; 1/2 show a transfer gain that pays"]


def test_one_seed_needs_only_three_points(transfer):
    (row,) = transfer.summarize([run("t5", "t", 0, 0.60, 0.565, majority=0.58, bow=0.65)])
    assert row["gain_sd"] is None and row["pays"]  # +3.5 points
    assert "| 60.0 | 56.5 | +3.5 | yes |" in transfer.format_table([row])
    assert transfer.summary_lines([row])[0].startswith("t: fine-tuned from pretraining, 0/1 architectures beat the "
                                                        "majority class by >= 5 points and 0/1 reach bag of words")


@pytest.mark.parametrize("argv, message", [
    (["--arch", "gpt", "nope"], "unknown architecture(s) nope"),
    (["--arch", "gpt", "--task", "./no/such/folder"], "task './no/such/folder': no such folder"),
    (["--arch", "gpt", "--set", "train.nokey=1"], "train.nokey: unknown key"),
    (["--arch", "gpt", "--set", "train.seed"], "expected KEY=VALUE"),
    (["--arch", "gpt"], "no pretrained model for gpt"),
])
def test_errors_are_one_line(transfer, tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert transfer.main(["--project", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("transfer.py: error: ") and message in err
    assert not (tmp_path / "benchmarks").exists()  # nothing was written


def test_the_curve_rows_time_to_pay_table_and_chart(transfer):
    """--budgets: one row per (architecture, task, budget); the time to pay is the least budget whose
    gain pays (mean >= 3 points and above the seeds' spread), none where no budget does."""
    def at(minutes, gains, arch="bert", steps=100):
        pre = {"steps": steps, "seconds": 60.0 * minutes, "loss": 6.0 - minutes / 10, "unigram_loss": 6.3, "path": "p"}
        return [{**run(arch, "t", seed, 0.50 + g / 100, 0.50), "budget_minutes": minutes, "pretraining": pre}
                for seed, g in enumerate(gains)]

    runs = [*at(4, [9, 11, 10], steps=1580), *at(1, [-5, -4, -6], steps=435), *at(2, [4, -4, 6], steps=900),
            *at(1, [1, 2, 0], arch="gpt"), *at(2, [2, 1, 3], arch="gpt")]
    rows = transfer.curve_rows(runs)
    assert [(r["architecture"], r["budget_minutes"]) for r in rows] == [("bert", 1), ("bert", 2), ("bert", 4),
                                                                        ("gpt", 1), ("gpt", 2)]
    bert4 = rows[2]
    assert bert4["gain"] == pytest.approx(10.0) and bert4["gain_sd"] == pytest.approx(1.0) and bert4["pays"]
    assert not rows[1]["pays"]  # mean +2 with sd 5.3 at 2 minutes
    assert transfer.time_to_pay(rows) == {"bert / t": 4, "gpt / t": None}
    assert transfer.time_to_pay_lines(rows) == ["bert / t: time to pay 4 minutes",
                                                "gpt / t: does not pay within 2 minutes"]
    table = transfer.format_curve(rows).splitlines()
    assert len(table) == 7 and table[4] == ("| bert | t | 4 | 1580 | 5.600 (6.300) | 60.0 ± 1.0 | 50.0 ± 0.0 | "
                                            "+10.0 ± 1.0 | yes |")
    png = transfer.draw_curves(rows)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    # with the pretrainings' compute records: what each budget cost
    rows[2]["pretraining"] = {**rows[2]["pretraining"], "compute": {"tokens": 3_200_000, "flops": 2.1e13,
                                                                      "seconds": 240.0, "cpu_seconds": 236.0, "device": "cpu"}}
    table = transfer.format_curve(rows).splitlines()
    assert table[0].endswith("| pays | pretraining cost |")
    assert table[4].endswith("| +10.0 ± 1.0 | yes | 3.2M tokens, 21T FLOP, 3.9 CPU-minutes |") and table[2].endswith("| – |")


@pytest.mark.parametrize("argv, message", [
    (["--budgets", "0"], "--budgets: each budget is a positive number of minutes"),
    (["--budgets", "2", "2"], "given once"),
    (["--chart", "c.png"], "--chart draws the curves of --budgets"),
    (["--budgets", "2", "--pretrain"], "--budgets pretrains for each budget itself"),
    (["--time-to-pay", "--budgets", "2"], "--time-to-pay pretrains each architecture for its own budget"),
    (["--time-to-pay", "--pretrain"], "--time-to-pay pretrains each architecture for its own budget"),
    (["--time-to-pay", "0"], "--time-to-pay: the cap is a positive number of minutes"),
])
def test_curve_arguments_are_checked(transfer, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        transfer.parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_profile_pretrains_each_architecture_for_its_recipes_time_to_pay(transfer, monkeypatch):
    """--time-to-pay: the recipe's measured minutes; the cap where it records none (ELMo) or none
    of its measured budgets paid (BART)."""
    from lmforge.config import load_params

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo)
    said = []
    plan = transfer.time_to_pay_plan(load_params(repo / "params.yaml"), ["bert", "bart", "elmo"], 6.0, said.append)
    assert plan == {"bert": [4.0], "bart": [6.0], "elmo": [6.0]}
    assert said[0].startswith("== bert: its time to pay, 4 minutes (BENCHMARKS.md: 2026-11-27: time to pay")
    assert said[1] == "== bart: no measured time to pay in its recipe; the cap, 6 minutes"
    assert said[2] == "== elmo: no measured time to pay in its recipe; the cap, 6 minutes"
    assert transfer.parse_args(["--time-to-pay"]).time_to_pay == 8.0
