"""What fine-tuning does differently for each task family beyond classification: the inputs, the
scorer of a split, the baselines, the metric selected on and the closing log line.

- regression: the sequence head with one output (``finetune_regression.py``);
- tagging: the tagging head, each word's tag at its first sub-token (``finetune_tagging.py``);
- span QA: the span head over the context's windows (``finetune_spans.py``);
- generation: BART, T5 and Switch sequence to sequence, GPT as a conditional LM
  (``finetune_generation.py``);
- tagging and span QA text to text, for an architecture whose recipe fine-tunes text to text
  (T5, BART and Switch by default): the entities or the answer written as text and read back
  (``finetune_text_to_text.py``).

Classification (the sequence heads, and T5 / BART / Switch text to text) stays in ``finetune.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..finetuning import baselines
from ..finetuning.features import FeatureError
from ..finetuning.generation_features import check_writer, encode_pairs
from ..finetuning.span_features import encode_questions
from ..finetuning.tagging_features import encode_tagged
from ..finetuning.tasks import Task
from ..finetuning.tasks.glue import FAMILY_METRICS
from ..finetuning.text_to_text_families import TEXT_TO_TEXT_FAMILIES, as_pairs, text_prefix
from .finetune_generation import TEST_BEAMS, generation_scorer
from .finetune_regression import regression_scorer
from .finetune_spans import span_scorer
from .finetune_tagging import tagging_scorer
from .finetune_text_to_text import text_to_text_scorer

SPLITS = ("train", "validation", "test")


@dataclass
class FamilyInputs:
    """A non-classification task encoded for one architecture: the model inputs of each split,
    the number of outputs of its head, and what scoring a split needs besides them."""

    family: str
    encoded: dict[str, list]
    num_labels: int | None  # the head's outputs; None: the pretraining head (generation)
    extra: dict[str, Any] = field(default_factory=dict)  # per split: words, windows, prompts
    text_to_text: bool = False  # a tagging or span QA task written as text

    @property
    def model_mode(self) -> str:
        """How ``finetune.head_model`` builds the model: a writer keeps its pretraining head."""
        return "text_to_text" if self.family == "generation" or self.text_to_text else self.family


def writes_family(recipe_mode: str, family: str) -> bool:
    """Whether a task of ``family`` is fine-tuned text to text: tagging and span QA where the
    recipe's ``finetune.mode`` is ``text_to_text`` (the other architectures use their heads)."""
    return recipe_mode == "text_to_text" and family in TEXT_TO_TEXT_FAMILIES


def selection_metric(task: Task) -> str:
    """The metric to select on: the task's own (``load_task`` names it), else its family's."""
    return task.info.get("metric") or FAMILY_METRICS[task.family]


def check_family(task: Task, arch: str, augment: bool, recipe: Path, text_to_text: bool = False) -> None:
    """One error before any work: an architecture that does not write on a generation task (or
    on a task written as text), augmentation (it makes classification examples) on another family."""
    if task.family == "generation" or text_to_text:
        try:
            check_writer(arch)
        except FeatureError as exc:
            raise ConfigError(f"{task.name}: {exc}") from None
    if augment:
        raise ConfigError(f"{recipe}: finetune.augment makes classification examples; {task.name} is a "
                          f"{task.family} task")


def encode_family(task: Task, arch: str, tok_dir: Path, max_length: int, text_to_text: bool = False) -> FamilyInputs:
    """The splits of ``task`` as ``arch``'s inputs for the task's family (``text_to_text``: a
    tagging or span QA task as source/target pairs)."""
    family = task.family
    encoded: dict[str, list] = {}
    extra: dict[str, Any] = {}
    if family == "generation" or text_to_text:
        pairs, prefix = (as_pairs(task), text_prefix(task)) if text_to_text else (task.splits, task.prefix)
        for split in SPLITS:
            encoded[split] = encode_pairs(pairs[split], arch, tok_dir, max_length, prefix=prefix)
            if split != "train":  # what the model writes from: the inputs without the target
                extra[split] = encode_pairs(pairs[split], arch, tok_dir, max_length, prefix=prefix, with_target=False)
        return FamilyInputs(family, encoded, None, extra, text_to_text=text_to_text)
    if family == "span_qa":
        for split in SPLITS:
            encoded[split], *extra[split] = encode_questions(task.splits[split], arch, tok_dir, max_length,
                                                             prefix=task.prefix, train=split == "train")
        if not encoded["train"]:
            raise ConfigError(f"{task.name}: no training window holds its answer at max_length {max_length}")
        return FamilyInputs(family, encoded, 2, extra)
    if family == "tagging":
        tag_ids = {name: i for i, name in enumerate(task.label_names)}
        for split in SPLITS:
            encoded[split], extra[split] = encode_tagged(task.splits[split], arch, tok_dir, max_length, tag_ids,
                                                         prefix=task.prefix)
        return FamilyInputs(family, encoded, len(task.label_names), extra)
    if family == "regression":
        from ..finetuning.features import encode_split

        for split in SPLITS:
            encoded[split] = encode_split(task, split, arch, tok_dir, max_length, {}, mode="regression")
        return FamilyInputs(family, encoded, 1, extra)
    raise ConfigError(f"{task.name}: no fine-tuning for {family} tasks here")


def family_scorer(inputs: FamilyInputs, task: Task, split: str, arch: str, tok_dir: Path, collate: Callable):
    """``evaluate(model, device)`` of ``split`` (the test split's with its fuller record: per-type
    tagging scores, generation samples written by beam search)."""
    family, encoded, test = inputs.family, inputs.encoded[split], split == "test"
    if inputs.text_to_text:
        return text_to_text_scorer(arch, inputs.extra[split], task, split, collate, tok_dir, per_type=test,
                                   samples=5 if test else 0)
    if family == "regression":
        return regression_scorer(encoded, collate)
    if family == "generation":
        return generation_scorer(arch, inputs.extra[split], task.splits[split], collate, tok_dir,
                                 task.info.get("generation_kind", "text"), num_beams=TEST_BEAMS if test else 1,
                                 samples=5 if test else 0)
    if family == "span_qa":
        return span_scorer(encoded, *inputs.extra[split], task.splits[split], collate)
    return tagging_scorer(encoded, inputs.extra[split], task.splits[split], collate, task.label_names, per_type=test)


def family_baselines(task: Task, seed: int) -> dict[str, dict]:
    """The baselines of a task that is not classification, by family (``finetuning.headline``)."""
    if task.family == "tagging":
        return {"most_frequent_tag": baselines.most_frequent_tag_baseline(task)}
    if task.family == "regression":
        return {"mean": baselines.mean_baseline(task),
                "bag_of_words": baselines.bag_of_words_regression_baseline(task, seed=seed)}
    if task.family == "generation":
        from ..finetuning.generation_baselines import copy_input_baseline, lead_sentence_baseline

        return {"lead_sentence": lead_sentence_baseline(task), "copy_input": copy_input_baseline(task)}
    from ..finetuning.span_baselines import sliding_window_baseline

    return {"sliding_window": sliding_window_baseline(task)}


def family_summary(metrics: dict[str, Any], select: str) -> str:
    """The test scores against the baselines, for the closing log line."""
    t, b, family = metrics["test"], metrics["baselines"], metrics["family"]
    if family == "generation":
        return (f"test {select} {t[select]:.3f} (lead sentence {b['lead_sentence'].get(select, float('nan')):.3f}, "
                f"copy input {b['copy_input'].get(select, float('nan')):.3f})")
    if family == "span_qa":
        w = b["sliding_window"]
        return (f"test exact match {t['exact_match']:.3f}, F1 {t['f1']:.3f} (sliding window: exact match "
                f"{w['exact_match']:.3f}, F1 {w['f1']:.3f})")
    if family == "regression":
        w = b["bag_of_words"]
        return (f"test Pearson {t['pearson']:.3f}, Spearman {t['spearman']:.3f}, MSE {t['mse']:.3f} (bag of words: "
                f"Pearson {w['pearson']:.3f}, Spearman {w['spearman']:.3f}; the mean: MSE {b['mean']['mse']:.3f})")
    return (f"test entity F1 {t['f1']:.3f} (precision {t['precision']:.3f}, recall {t['recall']:.3f}), token accuracy "
            f"{t['token_accuracy']:.3f} (most frequent tag: entity F1 {b['most_frequent_tag']['f1']:.3f})")
