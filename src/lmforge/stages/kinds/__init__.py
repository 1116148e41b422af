"""Every kind of stage, each defined once in its own module, in the order the graph runs them."""

from __future__ import annotations

from ..kind import StageKind
from . import clean, dataset, evaluate, finetune, pretrain, report, tokenizer, tokens

KINDS: dict[str, StageKind] = {m.KIND.name: m.KIND for m in (clean, tokenizer, tokens, dataset, pretrain, finetune, evaluate, report)}

GROUPS = tuple(dict.fromkeys(k.group for k in KINDS.values()))
