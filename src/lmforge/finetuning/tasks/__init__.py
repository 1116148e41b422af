"""Fine-tuning tasks: labelled examples in train / validation / test splits.

``load_task(spec)`` builds one: ``"docstring_kind"`` (the default), ``"docstring_package"`` or
``"docstring_params"`` (a tagging task) or ``"docstring_signature"`` (pair classification:
does a paragraph belong to a signature) or ``"docstring_qa"`` (extractive QA: find a signature's
blanked parameter in the docstring; all five from the clean corpus: ``CORPUS_TASKS``), a
folder of CSV / TSV / JSONL files, or ``"hf:NAME[/CONFIG]"``; every split may be capped by a seeded
sample. ``base`` holds what every task shares, one module per source builds it (``docstring_kind``,
``docstring_package``, ``folder``, ``hf``; ``corpus_paragraphs`` reads the clean corpus for the first two,
``rows`` GLUE-style columns for the last two). ``"docstring_summary"``
(generation: a docstring's first sentence from the rest) is a corpus task too, and a folder of
``generation_files``' columns (CNN/DailyMail, XSum, WMT, ...) a generation task. Reference:
``docs/FINETUNING.md``.
"""

from .base import (CARVE_FRACTION, FAMILIES, SPLIT_NAMES, Answer, Example, SpanQuestion, TaggedSentence, Task, TaskError,
                   TextPair, cap_splits, carve_validation, check_task)
from .docstring_kind import DEFAULT_TASK
from .docstring_package import PACKAGE_TASK
from .docstring_params import PARAMS_TASK
from .docstring_qa import QA_TASK
from .docstring_signature import SIGNATURE_TASK
from .docstring_summary import SUMMARY_TASK
from .load import CORPUS_TASKS, load_task

__all__ = [
    "CARVE_FRACTION", "CORPUS_TASKS", "DEFAULT_TASK", "FAMILIES", "PACKAGE_TASK", "PARAMS_TASK", "QA_TASK",
    "SIGNATURE_TASK", "SPLIT_NAMES", "SUMMARY_TASK", "Answer",
    "Example", "SpanQuestion", "TaggedSentence", "Task", "TaskError", "TextPair", "cap_splits", "carve_validation",
    "check_task", "load_task",
]
