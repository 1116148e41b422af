"""Every objective by name, and the tokenizer kind whose token store it reads: plain dicts."""

from __future__ import annotations

from .bilm import BidirectionalLM
from .clm import CausalLM
from .denoising import Denoising
from .mlm import MLM, KnowledgeMLM, MLMNextSentence, MLMSentenceOrder
from .permutation import PermutationLM
from .segments import Segments
from .span_corruption import SpanCorruption

OBJECTIVES = {
    cls.name: cls
    for cls in (
        CausalLM, MLM, MLMNextSentence, MLMSentenceOrder, KnowledgeMLM,
        SpanCorruption, Denoising, PermutationLM, Segments, BidirectionalLM,
    )
}

# Which token store each objective reads (see tokenization/kinds.py for the architectures).
OBJECTIVE_TOKENIZER = {
    "clm": "bpe",              # GPT
    "mlm": "wordpiece",        # BERT
    "mlm_nsp": "wordpiece",    # BERT
    "mlm_sop": "unigram",      # ALBERT
    "knowledge_mlm": "wordpiece",  # ERNIE 1.0
    "span_corruption": "unigram",  # T5, Switch
    "denoising": "bpe",        # BART
    "permutation": "unigram",  # XLNet
    "segments": "bpe",         # Transformer-XL
    "bilm": "char",            # ELMo
}
