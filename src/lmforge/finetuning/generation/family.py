"""Generation: BART, T5 and Switch sequence to sequence, GPT as a conditional LM, each keeping its
pretraining head (``features.py``: source/target pairs); what the model writes is scored by the
task kind's metrics (``metrics.py``: ROUGE for summaries, BLEU and chrF for translation, exact
match always), greedy during training and with beam search on the test split (``scorer.py``),
against the lead sentence and the copied input (``baselines.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...config import ConfigError
from ..features import FeatureError
from ..family import SPLITS, WRITTEN, Family, FamilyInputs, refuse_augment
from ..tasks import Task, TextPair
from .baselines import copy_input_baseline, lead_sentence_baseline
from .features import check_writer, encode_pairs


def check_writes(task: Task, arch: str) -> None:
    """An error naming the task for an architecture that does not write text."""
    try:
        check_writer(arch)
    except FeatureError as exc:
        raise ConfigError(f"{task.name}: {exc}") from None


def encode_written(pairs: dict[str, list[TextPair]], prefix: str, arch: str, tok_dir: Path,
                   max_length: int) -> FamilyInputs:
    """Source/target pairs as a writer's inputs, and per evaluated split what the model writes
    from (the inputs without the target); the pretraining head (``text_to_text``)."""
    encoded: dict[str, list] = {}
    extra: dict[str, Any] = {}
    for split in SPLITS:
        encoded[split] = encode_pairs(pairs[split], arch, tok_dir, max_length, prefix=prefix)
        if split != "train":
            extra[split] = encode_pairs(pairs[split], arch, tok_dir, max_length, prefix=prefix, with_target=False)
    return FamilyInputs(encoded, 0, WRITTEN, extra)


class Generation(Family):
    name = "generation"
    default_metric = "rougeL"  # headline: the task's own metric (BLEU for translation, ...), else ROUGE-L
    baseline_metrics = {"lead_sentence": "", "copy_input": ""}

    def check(self, task: Task, arch: str, ft: Any, recipe: Path) -> None:
        check_writes(task, arch)
        refuse_augment(task, ft, recipe)

    def encode(self, task: Task, arch: str, tok_dir: Path, max_length: int, mode: str) -> FamilyInputs:
        return encode_written(task.splits, task.prefix, arch, tok_dir, max_length)

    def scorer(self, inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
        from .scorer import TEST_BEAMS, generation_scorer

        test = split == "test"
        return generation_scorer(arch, inputs.extra[split], task.splits[split], collate, tok_dir,
                                 task.info.get("generation_kind", "text"), num_beams=TEST_BEAMS if test else 1,
                                 samples=5 if test else 0)

    def baselines(self, task: Task, seed: int) -> dict[str, dict]:
        return {"lead_sentence": lead_sentence_baseline(task), "copy_input": copy_input_baseline(task)}

    def summary(self, metrics: dict[str, Any], select: str) -> str:
        t, b = metrics["test"], metrics["baselines"]
        return (f"test {select} {t[select]:.3f} (lead sentence {b['lead_sentence'].get(select, float('nan')):.3f}, "
                f"copy input {b['copy_input'].get(select, float('nan')):.3f})")


FAMILY = Generation()
