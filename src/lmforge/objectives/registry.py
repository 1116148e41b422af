"""Every objective by name, and the tokenizer kind whose token store it reads."""

from __future__ import annotations

from .base import ObjectiveError
from .bilm import BidirectionalLM
from .clm import CausalLM
from .denoising import Denoising
from .knowledge_masking import KnowledgeMLM
from .mlm import MLM
from .permutation import PermutationLM
from .segments import Segments
from .sentence_pairs import MLMNextSentence, MLMSentenceOrder
from .span_corruption import SpanCorruption

OBJECTIVES = {
    cls.name: cls
    for cls in (
        CausalLM, MLM, MLMNextSentence, MLMSentenceOrder, KnowledgeMLM,
        SpanCorruption, Denoising, PermutationLM, Segments, BidirectionalLM,
    )
}

# Which token store each objective reads (each objective's ``tokenizer_kind``; see
# tokenizer_kinds.py for the architectures).
OBJECTIVE_TOKENIZER = {name: cls.tokenizer_kind for name, cls in OBJECTIVES.items()}


def tokenizer_kind(objective: str) -> str:
    """The tokenizer kind whose token store the objective ``objective`` reads."""
    if objective not in OBJECTIVES:
        raise ObjectiveError(f"unknown objective {objective!r}; known: {', '.join(sorted(OBJECTIVES))}")
    return OBJECTIVES[objective].tokenizer_kind
