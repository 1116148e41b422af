"""What a pretrained model writes for a few fixed prompts: the samples the evaluate stage keeps
beside the numbers (``leaderboard.md``, the Dagster asset's metadata, an MLflow artifact).

The causal models (GPT, Transformer-XL, XLNet) continue ``GENERATE_PROMPTS`` greedily; the models
trained to fill blanks (BERT, ALBERT, ERNIE, T5, Switch, BART) fill ``FILL_PROMPTS``; ELMo writes
nothing.
"""

from __future__ import annotations

from .fill_mask import FILLERS, fill_mask
from .generate import Settings, generate_text
from .loading import LoadedModel

GENERATE_PROMPTS = ("Return the", "This module provides", "If the file does not exist,")
FILL_PROMPTS = ("Return the [MASK] of the file.", "This module provides [MASK] for reading files.",
                "Raise an error if the [MASK] is not found.")
CAUSAL = ("gpt", "transformer_xl", "xlnet")
NEW_TOKENS = 20


def samples(loaded: LoadedModel) -> list[dict[str, str]]:
    """[{prompt, output}] for the model's kind (empty for ELMo), greedy: the same on every run."""
    if loaded.arch in CAUSAL:
        return [{"prompt": p, "output": generate_text(loaded, p, Settings(max_new_tokens=NEW_TOKENS))}
                for p in GENERATE_PROMPTS]
    if loaded.arch in FILLERS:
        out = []
        for p in FILL_PROMPTS:
            filled = fill_mask(loaded, p, top_k=3, settings=Settings(max_new_tokens=NEW_TOKENS))
            best = ", ".join(c["token_str"] for c in filled.blanks[0]) if filled.blanks else ""
            out.append({"prompt": p, "output": filled.sequence + (f" (blank: {best})" if best else "")})
        return out
    return []


def samples_markdown(by_arch: dict[str, list[dict[str, str]]]) -> str:
    """A Markdown table: architecture, prompt, what it wrote (``|`` and newlines escaped)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ").strip() or " "

    rows = [f"| {arch} | {cell(s['prompt'])} | {cell(s['output'])} |" for arch, items in by_arch.items() for s in items]
    if not rows:
        return ""
    return "\n".join(["| architecture | prompt | what the pretrained model wrote |", "|---|---|---|", *rows]) + "\n"
