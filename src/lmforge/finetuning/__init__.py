"""Fine-tuning data: tasks (``tasks/``), model inputs per architecture (``features.py``) and
the baselines a fine-tuned model should beat (``baselines.py``)."""

from .baselines import accuracy, bag_of_words_baseline, macro_f1, majority_baseline
from .features import FeatureError, collate, encode_split, label_token_ids, model_overrides, pad_id, text_to_text
from .tasks import DEFAULT_TASK, Example, Task, TaskError, load_task

__all__ = [
    "DEFAULT_TASK", "Example", "FeatureError", "Task", "TaskError", "accuracy", "bag_of_words_baseline", "collate",
    "encode_split", "label_token_ids", "load_task", "macro_f1", "majority_baseline", "model_overrides", "pad_id",
    "text_to_text",
]
