"""GLUE's metric per task (Wang et al. 2019, as the benchmark scores each): a task named as a
GLUE task — ``hf:glue/<task>``, or a folder named like GLUE's own (``CoLA``, ``MRPC``, ``SST-2``,
``STS-B``, ``MNLI-mm``) — is scored on its metric besides accuracy; any other classification task
on accuracy.

The headline metric of each task family (``task_metric``'s ``family``, ``FAMILY_METRICS``):

- ``classification``: GLUE's for a GLUE task (``mcc`` for CoLA, ``f1`` for MRPC and QQP), else
  ``accuracy``; here ``f1`` is the F1 of the positive label (the second of two), and falls back to
  accuracy on a task without exactly two labels;
- ``regression``: ``pearson`` (STS-B's, GLUE's first of the two correlations it reports;
  ``spearman`` is reported beside it, ``regression.metrics.correlations``);
- ``tagging``: ``f1``, meaning entity-level micro F1 (seqeval's, conlleval's rule:
  ``tagging.metrics.entity_scores``), not a label's F1;
- ``span_qa``: ``f1``, meaning SQuAD's token F1 (the bag-of-tokens overlap of the normalised
  answer with the best gold answer, averaged over questions: ``span_qa.metrics``); ``exact_match``
  is reported beside it;
- ``generation``: by the task's ``generation_kind`` (``task.info["generation_kind"]``, passed as
  ``task_metric``'s ``generation_kind``; ``GENERATION_METRICS``): ``rougeL`` (ROUGE-L F-measure)
  for ``summarization``, ``bleu`` (sacrebleu's corpus BLEU) for ``translation``, ``exact_match``
  (SQuAD-normalised) for ``qa``, and ``rougeL`` for generic ``text`` or no kind; the names are
  keys of ``generation.metrics.generation_scores``' result, all in [0, 1].

The classification metrics themselves are ``finetuning.classification.metrics``' (scikit-learn's)."""

from __future__ import annotations

import re

# task -> its headline metric among the classification scores
GLUE_METRICS = {"cola": "mcc", "sst2": "accuracy", "mrpc": "f1", "qqp": "f1", "mnli": "accuracy",
                "mnli_matched": "accuracy", "mnli_mismatched": "accuracy", "qnli": "accuracy", "rte": "accuracy",
                "wnli": "accuracy", "ax": "mcc", "stsb": "pearson"}
DEFAULT_METRIC = "accuracy"
# each family's headline metric (classification: GLUE's or accuracy, see task_metric)
FAMILY_METRICS = {"regression": "pearson", "tagging": "f1", "span_qa": "f1", "generation": "rougeL"}
# a generation task's headline metric by its generation_kind (generation without a kind: FAMILY_METRICS')
GENERATION_METRICS = {"summarization": "rougeL", "translation": "bleu", "qa": "exact_match", "text": "rougeL"}
# other spellings of GLUE's task names (after dropping case, "-", "_" and spaces)
GLUE_ALIASES = {"mnlimm": "mnli_mismatched", "mnlimismatched": "mnli_mismatched", "mnlimatched": "mnli_matched"}


def canonical_glue_name(name: str) -> str:
    """A folder or config name as GLUE's task name would be: case, ``-``, ``_`` and spaces
    ignored (``SST-2`` -> ``sst2``, ``STS-B`` -> ``stsb``), ``MNLI-mm`` -> ``mnli_mismatched``."""
    key = re.sub(r"[-_\s]+", "", name).lower()
    return GLUE_ALIASES.get(key, key)


def glue_name(spec: str) -> str | None:
    """The GLUE task a task spec names (``hf:glue/cola``, ``hf:nyu-mll/glue/mrpc``, a folder
    ``.../SST-2``, ``.../MNLI-mm``), or None."""
    spec = spec.strip().rstrip("/\\")
    if spec.startswith("hf:"):
        parts = spec[3:].split("/")
        if len(parts) >= 2 and parts[-2].lower() == "glue":
            name = canonical_glue_name(parts[-1])
            return name if name in GLUE_METRICS else None
        return None
    name = canonical_glue_name(re.split(r"[/\\]", spec)[-1])
    return name if name in GLUE_METRICS else None


def task_metric(spec: str, label_names: list[str], family: str = "classification",
                generation_kind: str | None = None) -> str:
    """The metric a task is scored on: its family's (``FAMILY_METRICS``) for a regression,
    tagging or span-QA task; a generation task's by its ``generation_kind``
    (``GENERATION_METRICS``; an unknown kind is a ValueError); for a classification task GLUE's
    for a GLUE task, accuracy otherwise. F1 needs a two-label task; a GLUE name on a folder with
    other labels falls back to accuracy."""
    if family == "generation" and generation_kind is not None:
        if generation_kind not in GENERATION_METRICS:
            raise ValueError(f"task {spec!r}: unknown generation_kind {generation_kind!r}; "
                             f"known: {', '.join(GENERATION_METRICS)}")
        return GENERATION_METRICS[generation_kind]
    if family in FAMILY_METRICS:
        return FAMILY_METRICS[family]
    name = glue_name(spec)
    metric = GLUE_METRICS.get(name, DEFAULT_METRIC) if name else DEFAULT_METRIC
    if metric == "f1" and len(label_names) != 2:
        return DEFAULT_METRIC
    return metric
