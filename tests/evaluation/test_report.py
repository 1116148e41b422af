"""The leaderboard report on three fake evaluations: values computed from the inputs, Markdown,
metrics.json, plots and their CSVs, atomic output, clear errors."""

import json
import math

import pandas as pd
import pytest

from lmforge.evaluation.report import format_leaderboard, leaderboard, load_evaluations, write_report
from lmforge.evaluation.report.leaderboard import short_of_time_to_pay

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TASK = "docstring_kind"


def _history(path, rows):
    """rows: (step, train_loss or None, val_loss or None); train and validation on separate rows,
    as the trainer writes them."""
    lines = ["step,lr,train/loss,val/loss"]
    for step, train, val in rows:
        if train is not None:
            lines.append(f"{step},0.001,{train},")
        if val is not None:
            lines.append(f"{step},,,{val}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _finetune(acc, f1, majority, bow):
    return {TASK: {"mode": "classification", "steps": 20, "seconds": 1.0,
                   "test": {"accuracy": acc, "macro_f1": f1, "examples": 90},
                   "validation": {"accuracy": acc - 0.01, "macro_f1": f1, "examples": 30},
                   "baselines": {"majority": {"accuracy": majority, "macro_f1": 0.2},
                                 "bag_of_words": {"accuracy": bow, "macro_f1": 0.5}}}}


def _evaluation(arch, objective, params, first, last, val, unigram, bpb, ubpb, acc, history, finetune=None):
    data = {
        "architecture": arch, "objective": objective, "tokenizer": "bpe", "preset": f"{arch}-tiny",
        "parameters": params,
        "pretrain": {"steps": 40, "train_loss_first": first, "train_loss_last": last, "seconds": 3.0,
                     "history": history, "mlflow_run_id": "x",
                     "validation": {"loss": val, "perplexity": math.exp(val), "accuracy": acc,
                                    "bits_per_byte": bpb, "unigram_loss": unigram,
                                    "unigram_bits_per_byte": ubpb, "uniform_loss": 8.99,
                                    "predicted_tokens": 1000}},
        "promotion": {f"lmforge-{arch}-{TASK}": {"version": "1", "champion": True}},
    }
    if finetune is not None:
        data["finetune"] = finetune
    return data


@pytest.fixture
def project(tmp_path):
    """tmp_path as project root: data/report/evaluation/<arch>.json and relative history paths
    (bert's is absolute)."""
    evaldir = tmp_path / "data" / "report" / "evaluation"
    evaldir.mkdir(parents=True)
    _history(tmp_path / "models/gpt/pretrain/history.csv",
             [(1, 9.0, None), (10, 7.5, None), (20, 6.4, 6.5), (30, 6.0, None), (40, 5.8, 6.1)])
    bert_history = tmp_path / "models/bert/pretrain/history.csv"
    _history(bert_history, [(1, 9.2, None), (20, 7.0, None), (40, 6.6, 6.9)])
    _history(tmp_path / "models/xlnet/pretrain/history.csv",
             [(1, 9.1, None), (20, 8.3, 8.2), (40, 7.6, 7.4)])
    evaluations = {
        # learns, beats both baselines
        "gpt": _evaluation("gpt", "clm", 1_830_000, 9.0, 5.8, 6.1, 6.85, 2.2, 2.44, 0.116,
                           "models/gpt/pretrain/history.csv", _finetune(0.70, 0.65, 0.45, 0.66)),
        # no finetune at all
        "bert": _evaluation("bert", "mlm", 2_100_000, 9.2, 6.6, 6.9, 7.3, 2.5, 2.7, 0.09, str(bert_history)),
        # below its start but above its unigram baseline; beats majority only, other baselines than gpt's
        "xlnet": _evaluation("xlnet", "plm", 2_500_000, 9.1, 7.6, 7.4, 7.0, 2.9, 2.75, 0.05,
                             "models/xlnet/pretrain/history.csv", _finetune(0.55, 0.40, 0.40, 0.62)),
    }
    for arch, data in evaluations.items():
        (evaldir / f"{arch}.json").write_text(json.dumps(data), encoding="utf-8")
    return tmp_path, evaldir, evaluations


def test_load_sorted_and_ordered(project):
    root, evaldir, _ = project
    assert [e["architecture"] for e in load_evaluations(evaldir)] == ["bert", "gpt", "xlnet"]
    assert [e["architecture"] for e in load_evaluations(evaldir, order=["xlnet", "gpt"])] == ["xlnet", "gpt", "bert"]
    # the evaluate stage's output folder works too
    assert len(load_evaluations(evaldir.parent)) == 3


def test_missing_directory_is_a_clear_error(tmp_path):
    missing = tmp_path / "nowhere" / "evaluation"
    with pytest.raises((FileNotFoundError, ValueError), match="nowhere"):
        load_evaluations(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises((FileNotFoundError, ValueError), match="empty"):
        load_evaluations(empty)


def test_leaderboard_values_come_from_inputs(project):
    _, evaldir, raw = project
    df = leaderboard(load_evaluations(evaldir)).set_index("architecture")
    assert list(df.index) == ["bert", "gpt", "xlnet"]
    for arch, data in raw.items():
        row, val = df.loc[arch], data["pretrain"]["validation"]
        assert row["objective"] == data["objective"]
        assert row["parameters"] == data["parameters"]
        assert row["steps"] == data["pretrain"]["steps"]
        assert row["loss_start"] == pytest.approx(data["pretrain"]["train_loss_first"])  # no validation_start in these inputs
        assert row["val_loss"] == pytest.approx(val["loss"])
        assert row["unigram_loss"] == pytest.approx(val["unigram_loss"])
        assert row["token_accuracy"] == pytest.approx(val["accuracy"])
        assert row["bits_per_byte"] == pytest.approx(val["bits_per_byte"])
        assert bool(row["below_start"]) == (val["loss"] < data["pretrain"]["train_loss_first"])
        assert bool(row["below_unigram"]) == (val["loss"] < val["unigram_loss"])
    assert not df.loc["xlnet", "below_unigram"] and df.loc["xlnet", "below_start"]
    assert df.loc["gpt", "below_unigram"] and df.loc["bert", "below_unigram"]
    # downstream: the default task is the first one found; test-split numbers
    assert set(df["task"].dropna()) == {TASK}
    assert df.loc["gpt", "task_accuracy"] == pytest.approx(0.70)
    assert df.loc["gpt", "task_macro_f1"] == pytest.approx(0.65)
    assert df.loc["xlnet", "bow_accuracy"] == pytest.approx(0.62)
    assert df.loc["gpt", "beats_majority"] and df.loc["gpt", "beats_bow"]
    assert df.loc["xlnet", "beats_majority"] and not df.loc["xlnet", "beats_bow"]
    # not fine-tuned: unknown, not False
    assert math.isnan(df.loc["bert", "task_accuracy"])
    assert df.loc["bert", "beats_majority"] is pd.NA and df.loc["bert", "beats_bow"] is pd.NA


def test_leaderboard_changes_with_inputs(project):
    _, evaldir, _ = project
    evaluations = load_evaluations(evaldir)
    xlnet = next(e for e in evaluations if e["architecture"] == "xlnet")
    xlnet["pretrain"]["validation"]["loss"] = 6.0
    xlnet["finetune"][TASK]["test"]["accuracy"] = 0.9
    row = leaderboard(evaluations).set_index("architecture").loc["xlnet"]
    assert row["below_unigram"] and row["beats_bow"]


def test_unknown_task_and_missing_keys(project):
    _, evaldir, _ = project
    evaluations = load_evaluations(evaldir)
    with pytest.raises(ValueError, match="no_such_task"):
        leaderboard(evaluations, task="no_such_task")
    sparse = [{"architecture": "t5", "pretrain": None, "finetune": None}]
    row = leaderboard(sparse).iloc[0]
    assert row["architecture"] == "t5" and math.isnan(row["val_loss"]) and row["below_start"] is pd.NA
    assert "t5" in format_leaderboard(leaderboard(sparse))


def test_write_report(project):
    root, evaldir, _ = project
    out = root / "data" / "report" / "leaderboard"
    result = write_report(load_evaluations(evaldir), out, root=root)
    names = {p.relative_to(out).as_posix() for p in result["files"]}
    assert names == {"leaderboard.csv", "leaderboard.md", "metrics.json", "loss_curves.png", "bits_per_byte.png",
                     "downstream.png", "plots/loss_bert.csv", "plots/loss_gpt.csv", "plots/loss_xlnet.csv"}
    assert all(p.is_file() for p in result["files"])
    # atomic: no temporary files left anywhere
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(names)
    assert not [p for p in out.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]

    # CSV round trip
    csv = pd.read_csv(out / "leaderboard.csv")
    assert list(csv["architecture"]) == ["bert", "gpt", "xlnet"]
    assert csv.set_index("architecture").loc["xlnet", "val_loss"] == pytest.approx(7.4)

    # Markdown: every architecture, the one above its unigram baseline flagged, ✓/✗
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    table = format_leaderboard(result["leaderboard"])
    assert table in md
    for arch in ("bert", "gpt", "xlnet"):
        assert f"| {arch} |" in table
    flagged = [line for line in md.splitlines() if line.startswith("- **")]
    assert len(flagged) == 1 and "xlnet" in flagged[0] and "unigram" in flagged[0]
    assert "✓" in table and "✗" in table
    assert "below_unigram" in md.split("|")[0]  # the header paragraph explains the columns

    # metrics.json: flat numbers per architecture, the right summary counts
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert set(metrics) == {"bert", "gpt", "xlnet", "summary"}
    for arch in ("bert", "gpt", "xlnet"):
        assert metrics[arch] and all(type(v) in (int, float) for v in metrics[arch].values())
    assert metrics["gpt"]["val_loss"] == pytest.approx(6.1)
    assert metrics["gpt"]["task_accuracy"] == pytest.approx(0.70)
    assert "task_accuracy" not in metrics["bert"]
    summary = metrics["summary"]
    assert summary["architectures"] == 3
    assert summary["below_start"] == 3
    assert summary["below_unigram"] == 2
    assert summary["beats_majority"] == 2
    assert summary["beats_bow"] == 1

    # PNGs
    for name in ("loss_curves.png", "bits_per_byte.png", "downstream.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, name

    # plot CSVs: rows with a train loss only, validation and the learning rate merged onto them
    gpt = pd.read_csv(out / "plots" / "loss_gpt.csv")
    assert list(gpt.columns) == ["step", "train_loss", "val_loss", "lr"]  # no tokens/s in these histories
    assert gpt["lr"].tolist() == pytest.approx([0.001] * 5)
    assert list(gpt["step"]) == [1, 10, 20, 30, 40]
    assert list(gpt["train_loss"]) == pytest.approx([9.0, 7.5, 6.4, 6.0, 5.8])
    assert gpt["val_loss"].isna().tolist() == [True, True, False, True, False]
    assert gpt.set_index("step").loc[40, "val_loss"] == pytest.approx(6.1)
    bert = pd.read_csv(out / "plots" / "loss_bert.csv")
    assert list(bert["step"]) == [1, 20, 40]

    # rewriting over an existing report works and still leaves no temporary files
    write_report(load_evaluations(evaldir), out, root=root)
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]


def test_missing_history_is_skipped(project, tmp_path):
    root, evaldir, _ = project
    (root / "models" / "bert" / "pretrain" / "history.csv").unlink()
    out = tmp_path / "out"
    result = write_report(load_evaluations(evaldir), out, root=root)
    assert not (out / "plots" / "loss_bert.csv").exists()
    assert (out / "plots" / "loss_gpt.csv").is_file()
    assert (out / "loss_curves.png").read_bytes()[:8] == PNG_MAGIC
    assert len(result["leaderboard"]) == 3


def test_loss_start_is_the_untrained_models_validation_loss_when_measured():
    from lmforge.evaluation.report import leaderboard

    ev = {"architecture": "bert", "pretrain": {"train_loss_first": 9.5, "validation_start": {"loss": 8.9},
                                               "validation": {"loss": 9.0, "unigram_loss": 9.2}}}
    row = leaderboard([ev]).iloc[0]
    assert row["loss_start"] == pytest.approx(8.9) and not bool(row["below_start"])


def test_the_transfer_column_says_pays_too_short_or_no_gain(project):
    """pays: a gain of at least 3 points; too short to pay: a loss gain below that from a
    pretraining that ended within 0.25 nats of its unigram baseline; no gain otherwise; empty
    without a control."""
    _, evaldir, _ = project
    evaluations = load_evaluations(evaldir)
    by_arch = {e["architecture"]: e for e in evaluations}
    gpt, xlnet = by_arch["gpt"], by_arch["xlnet"]
    assert leaderboard(evaluations).set_index("architecture").loc["gpt", "transfer"] is None  # no control yet
    gpt["finetune"][TASK]["scratch"] = {"test": {"accuracy": 0.665}}      # 0.70 - 0.665: +3.5 points
    xlnet["finetune"][TASK]["scratch"] = {"test": {"accuracy": 0.60}}     # 0.55 - 0.60: -5 points
    xlnet["pretrain"]["validation"].update(loss=6.80, unigram_loss=7.0)   # 0.20 nats under unigram: the plateau
    df = leaderboard(evaluations).set_index("architecture")
    assert df.loc["gpt", "transfer"] == "pays" and df.loc["xlnet", "transfer"] == "too short to pay"
    xlnet["pretrain"]["validation"].update(loss=6.70)                      # 0.30 nats under: off the plateau
    gpt["finetune"][TASK]["scratch"]["test"]["accuracy"] = 0.675           # +2.5 points
    df = leaderboard(evaluations).set_index("architecture")
    assert df.loc["xlnet", "transfer"] == "no gain" and df.loc["gpt", "transfer"] == "no gain"
    assert "too short to pay" in format_leaderboard(leaderboard([xlnet | {"pretrain": {**xlnet["pretrain"],
        "validation": {**xlnet["pretrain"]["validation"], "loss": 6.9}}}]))


def test_a_pretraining_shorter_than_its_recipes_time_to_pay_is_too_short_to_pay(project):
    """Off the plateau, a gain under 3 points is "too short to pay" when the pretraining had
    fewer CPU-minutes than its recipe's measured time to pay (or, where no measured budget paid,
    no more than the longest measured); "no gain" past it, on a GPU, or without a curve."""
    _, evaldir, _ = project
    xlnet = next(e for e in load_evaluations(evaldir) if e["architecture"] == "xlnet")
    xlnet["finetune"][TASK]["scratch"] = {"test": {"accuracy": 0.60}}     # 0.55 - 0.60: -5 points
    xlnet["pretrain"]["validation"].update(loss=6.0, unigram_loss=7.0)    # a nat under unigram: off the plateau

    def verdict(cpu_seconds, time_to_pay, device="cpu"):
        compute = {"tokens": 1000, "flops": 1e12, "seconds": cpu_seconds, "cpu_seconds": cpu_seconds,
                   "device": device, "devices": 1}
        ev = {**xlnet, "pretrain": {**xlnet["pretrain"], "compute": compute}, "time_to_pay": time_to_pay}
        return leaderboard([ev]).iloc[0]["transfer"], short_of_time_to_pay(ev)

    pays_at_4 = {"minutes": 4.0, "measured": [1.0, 2.0, 4.0], "task": "docstring_package", "source": "BENCHMARKS.md"}
    none_paid = {**pays_at_4, "minutes": None}
    assert verdict(150, pays_at_4) == ("too short to pay", "2.5 CPU-minutes of pretraining, where its recipe pays "
                                                           "after 4 on docstring_package")
    assert verdict(300, pays_at_4) == ("no gain", None)
    assert verdict(150, none_paid) == ("too short to pay", "2.5 CPU-minutes of pretraining, where its recipe did not "
                                                           "pay within 4 on docstring_package")
    assert verdict(300, none_paid) == ("no gain", None)
    assert verdict(150, pays_at_4, device="cuda:0") == ("no gain", None)  # GPU minutes are not the curve's
    assert verdict(150, None) == ("no gain", None)
    xlnet["finetune"][TASK]["scratch"]["test"]["accuracy"] = 0.50          # +5 points: it pays, however short
    assert verdict(150, pays_at_4)[0] == "pays"


def test_a_recipes_time_to_pay_is_one_of_its_measured_budgets():
    from lmforge.config.recipes import TimeToPay

    with pytest.raises(ValueError, match="not one of the measured budgets"):
        TimeToPay(minutes=3.0, measured=[1.0, 2.0, 4.0], task="t")
    with pytest.raises(ValueError, match="positive minutes"):
        TimeToPay(minutes=None, measured=[0.0, 2.0], task="t")


def test_the_compute_columns_and_what_the_gain_cost_come_from_the_pretrainings_record(project):
    _, evaldir, _ = project
    evaluations = load_evaluations(evaldir)
    gpt = next(e for e in evaluations if e["architecture"] == "gpt")
    gpt["finetune"][TASK]["scratch"] = {"test": {"accuracy": 0.604}}  # 0.70 - 0.604: +9.6 points
    gpt["pretrain"]["compute"] = {"tokens": 12_000_000, "flops": 1.3e15, "seconds": 700.0, "cpu_seconds": 780.0,
                                  "device": "cpu", "devices": 1, "mfu": None}
    row = leaderboard(evaluations).set_index("architecture").loc["gpt"]
    assert (row["pretrain_tokens"], row["pretrain_flops"], row["pretrain_minutes"]) == (12_000_000, 1.3e15, 13.0)
    assert math.isnan(row["pretrain_mfu"])  # no peak known for a CPU
    assert row["transfer_cost"] == "+9.6 points for 12M tokens, 1.3P FLOP, 13.0 CPU-minutes"
    # on GPUs: wall time x GPUs, and the MFU
    gpt["pretrain"]["compute"].update(device="NVIDIA H100 80GB HBM3", devices=2, seconds=90.0, mfu=0.301)
    row = leaderboard(evaluations).set_index("architecture").loc["gpt"]
    assert (row["pretrain_minutes"], row["pretrain_mfu"]) == (3.0, 0.301)
    assert row["transfer_cost"].endswith("3.0 GPU-minutes")
    table = format_leaderboard(leaderboard(evaluations))
    assert "| 12M | 1.3P | 3.0 | 30.1% |" in table
    # an evaluation from before the record: empty cells, no cost
    xlnet = next(e for e in evaluations if e["architecture"] == "xlnet")
    assert leaderboard([xlnet]).iloc[0]["transfer_cost"] is None


def test_the_harness_columns_show_the_first_task_against_its_untrained_floor(project):
    _, evaldir, _ = project
    evaluations = load_evaluations(evaldir)
    by_arch = {e["architecture"]: e for e in evaluations}
    by_arch["gpt"]["harness"] = {"tasks": ["docstring_next"],
                                 "pretrained": {"docstring_next": {"acc": 0.41, "acc_norm": 0.43}},
                                 "untrained": {"docstring_next": {"acc": 0.255, "acc_norm": 0.25}}}
    by_arch["xlnet"]["harness"] = {"tasks": ["docstring_next"], "not_applicable": "no left-to-right scorer"}
    df = leaderboard(evaluations).set_index("architecture")
    assert (df.loc["gpt", "harness_task"], df.loc["gpt", "harness_acc"], df.loc["gpt", "harness_floor_acc"]) == \
        ("docstring_next", 0.41, 0.255)
    assert df.loc["xlnet", "harness_task"] == "not applicable" and math.isnan(df.loc["xlnet", "harness_acc"])
    assert "| docstring_next | 0.410 | 0.255 |" in format_leaderboard(leaderboard(evaluations))
