"""The report's downstream tables: one per task on its family's metric, with its baselines and
the from-scratch control; and the evaluate stage's transfer gain and baseline check per family."""

import pandas as pd

from lmforge.evaluation.report.tasks import task_frame, task_tables_markdown
from lmforge.evaluation.stage import transfer_gain

KIND = {"test": {"accuracy": 0.8, "macro_f1": 0.7}, "baselines": {"majority": {"accuracy": 0.5},
                                                                    "bag_of_words": {"accuracy": 0.85}},
        "scratch": {"test": {"accuracy": 0.7}}}
PARAMS = {"family": "tagging", "metric": "f1", "test": {"f1": 0.6, "token_accuracy": 0.9},
          "baselines": {"most_frequent_tag": {"f1": 0.4}}, "scratch": {"test": {"f1": 0.65}}}
EVALUATIONS = [{"architecture": "bert", "finetune": {"docstring_kind": KIND, "docstring_params": PARAMS}},
               {"architecture": "gpt", "finetune": {"docstring_kind": {**KIND, "scratch": None}}}]


def test_each_family_is_judged_on_its_own_metric_and_baselines():
    kind = task_frame(EVALUATIONS, "docstring_kind")
    assert list(kind["architecture"]) == ["bert", "gpt"] and set(kind["metric"]) == {"accuracy"}
    bert = kind.iloc[0]
    assert (bert["score"], bert["majority"], bert["bag_of_words"], bert["scratch"]) == (0.8, 0.5, 0.85, 0.7)
    assert bert["beats_majority"] and not bert["beats_bag_of_words"] and bert["beats_scratch"]
    assert abs(bert["transfer_gain"] - 0.1) < 1e-12
    assert pd.isna(kind.iloc[1]["scratch"]) and pd.isna(kind.iloc[1]["beats_scratch"])
    tagging = task_frame(EVALUATIONS, "docstring_params")
    assert list(tagging["architecture"]) == ["bert"]  # gpt was not fine-tuned on it
    row = tagging.iloc[0]
    assert (row["family"], row["metric"], row["score"], row["most_frequent_tag"]) == ("tagging", "f1", 0.6, 0.4)
    assert row["beats_most_frequent_tag"] and not row["beats_scratch"] and abs(row["transfer_gain"] + 0.05) < 1e-12
    assert "majority" not in tagging.columns


def test_the_markdown_has_a_table_per_task_and_the_gain_uses_the_family_metric():
    md = task_tables_markdown(EVALUATIONS)
    assert md.index("### `docstring_kind` (classification, accuracy)") < md.index("### `docstring_params` (tagging, f1)")
    assert "| bert | 0.600 | 0.400 | ✓ | 0.650 | -0.050 | ✗ |" in md
    assert "| gpt | 0.800 | 0.500 | ✓ | 0.850 | ✗ | – | – | – |" in md
    assert task_tables_markdown([{"architecture": "bert", "finetune": {}}]) == ""
    assert abs(transfer_gain(PARAMS) + 0.05) < 1e-12 and abs(transfer_gain(KIND) - 0.1) < 1e-12
