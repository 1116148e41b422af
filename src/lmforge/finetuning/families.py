"""The task families fine-tuning takes, each its room's ``FAMILY`` (``family.Family``), and the
one that fine-tunes a task: its family's, or the family written as text (``text_to_text/``)
where the recipe's ``finetune.mode`` is ``text_to_text`` and the family can be written."""

from __future__ import annotations

from ..config import ConfigError
from . import classification, generation, regression, span_qa, tagging
from .family import Family
from .tasks import Task
from .text_to_text import Written
from .text_to_text.pairs import TEXT_TO_TEXT_FAMILIES

FAMILIES_BY_NAME: dict[str, Family] = {f.name: f for f in (classification.FAMILY, regression.FAMILY, tagging.FAMILY,
                                                          span_qa.FAMILY, generation.FAMILY)}
WRITTEN_BY_NAME: dict[str, Family] = {name: Written(FAMILIES_BY_NAME[name]) for name in TEXT_TO_TEXT_FAMILIES}


def writes_family(recipe_mode: str, family: str) -> bool:
    """Whether a task of ``family`` is fine-tuned text to text: tagging and span QA where the
    recipe's ``finetune.mode`` is ``text_to_text`` (the other architectures use their heads)."""
    return recipe_mode == "text_to_text" and family in WRITTEN_BY_NAME


def family_for(task: Task, recipe_mode: str) -> Family:
    """The family that fine-tunes ``task`` under the recipe's ``finetune.mode``; one error for a
    family fine-tuning does not take."""
    if task.family not in FAMILIES_BY_NAME:
        raise ConfigError(f"{task.name} is a {task.family} task; fine-tuning takes {', '.join(FAMILIES_BY_NAME)} tasks")
    if writes_family(recipe_mode, task.family):
        return WRITTEN_BY_NAME[task.family]
    return FAMILIES_BY_NAME[task.family]
