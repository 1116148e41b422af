"""Fine-tuning without Lightning: tasks (``tasks/``), the model inputs per architecture
(``features.py``), and one room per task family (``classification/``, ``regression/``,
``tagging/``, ``span_qa/``, ``generation/``, ``text_to_text/``) with its inputs, scorer,
metrics and baselines, listed in ``families.py`` (how to add one: ``README.md``)."""

from .features import FeatureError, collate, encode_split, label_token_ids, model_overrides, pad_id, text_to_text
from .tasks import DEFAULT_TASK, Example, Task, TaskError, load_task

__all__ = [
    "DEFAULT_TASK", "Example", "FeatureError", "Task", "TaskError", "collate", "encode_split", "label_token_ids",
    "load_task", "model_overrides", "pad_id", "text_to_text",
]
