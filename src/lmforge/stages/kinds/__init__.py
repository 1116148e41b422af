"""Every kind of stage, each defined once in its own module, in the order the graph runs them."""

from __future__ import annotations

from ...finetuning.tasks.base import FAMILIES
from ..kind import StageKind
from . import clean, dataset, evaluate, finetune, pretrain, quality, report, tokenizer, tokens

KINDS: dict[str, StageKind] = {m.KIND.name: m.KIND for m in (clean, quality, tokenizer, tokens, dataset, pretrain, finetune, evaluate, report)}

# the kinds' groups, a fine-tuning group per task family after the classification one
# (``Stage.group``: finetuning_tagging, finetuning_span_qa, ...)
GROUPS = tuple(dict.fromkeys(g for k in KINDS.values() for g in (
    [k.group, *(f"{k.group}_{f}" for f in FAMILIES if f != "classification")] if k.name == "finetune" else [k.group])))
