"""GLUE's metric per task (Wang et al. 2019, as the benchmark scores each): a task named as a
GLUE task — ``hf:glue/<task>``, or a folder named like GLUE's own (``CoLA``, ``MRPC``, ``SST-2``)
— is scored on its metric besides accuracy; any other classification task on accuracy.

The metrics themselves are ``finetuning.baselines``' (scikit-learn's). STS-B is a regression
task (Pearson and Spearman), which the classification heads do not take."""

from __future__ import annotations

import re

# task -> its headline metric among the classification scores
GLUE_METRICS = {"cola": "mcc", "sst2": "accuracy", "mrpc": "f1", "qqp": "f1", "mnli": "accuracy",
                "mnli_matched": "accuracy", "mnli_mismatched": "accuracy", "qnli": "accuracy", "rte": "accuracy",
                "wnli": "accuracy", "ax": "mcc"}
DEFAULT_METRIC = "accuracy"


def glue_name(spec: str) -> str | None:
    """The GLUE task a task spec names (``hf:glue/cola``, ``hf:nyu-mll/glue/mrpc``, a folder
    ``.../SST-2``), or None."""
    spec = spec.strip().rstrip("/\\")
    if spec.startswith("hf:"):
        parts = spec[3:].split("/")
        if len(parts) >= 2 and parts[-2].lower() == "glue":
            name = parts[-1].lower()
            return name if name in GLUE_METRICS else None
        return None
    name = re.sub(r"[-\s]+", "", re.split(r"[/\\]", spec)[-1]).lower()
    return name if name in GLUE_METRICS else None


def task_metric(spec: str, label_names: list[str]) -> str:
    """The metric a task is scored on: GLUE's for a GLUE task, accuracy otherwise. F1 needs a
    two-label task; a GLUE name on a folder with other labels falls back to accuracy."""
    name = glue_name(spec)
    metric = GLUE_METRICS.get(name, DEFAULT_METRIC) if name else DEFAULT_METRIC
    if metric == "f1" and len(label_names) != 2:
        return DEFAULT_METRIC
    return metric
