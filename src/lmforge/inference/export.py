"""``lmforge export``: a trained model as a ``transformers`` folder, with its tokenizer and a
model card.

The weights go through ``interop.hf.export`` (the converted model gives our outputs). The
tokenizer is the trained one, with a post-processor that adds the special tokens the
architecture's inputs start and end with, so that ``AutoTokenizer`` and ``pipeline`` build the
inputs the model was trained on: ``[CLS] A [SEP]`` (BERT, ERNIE, ALBERT), ``A <sep> <cls>``
(XLNet), ``A </s>`` (T5, Switch), ``<s> A </s>`` (BART), ``<s> A </s>`` for a GPT classifier and
nothing for GPT's language model (its prompts continue). A fine-tuned classifier carries its
label names (``id2label`` / ``label2id``). ``README.md`` says what the model is: architecture,
objective or task, training steps and the metrics of its run.
"""

from __future__ import annotations

import json
from pathlib import Path

from .loading import InferenceError, LoadedModel

NO_TRANSFORMERS = ("elmo", "transformer_xl")


def special_template(loaded: LoadedModel) -> tuple[list[str], list[str]] | None:
    """(before, after): the special tokens around a text, by architecture and head."""
    v, arch = loaded.vocab, loaded.arch
    name = loaded.tokenizer.tokenizer.id_to_token
    if arch in ("bert", "ernie", "albert"):
        return [name(v.cls)], [name(v.sep)]
    if arch == "xlnet":
        return [], [name(v.sep), name(v.cls)]
    if arch in ("t5", "switch"):
        return [], [name(v.eos)]
    if arch == "bart" or (arch == "gpt" and loaded.head == "classification"):
        return [name(v.bos)], [name(v.eos)]
    return None


def _write_tokenizer(loaded: LoadedModel, out: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    tokenizer = Tokenizer.from_str(loaded.tokenizer.tokenizer.to_str())
    template = special_template(loaded)
    if template is not None:
        before, after = template
        single = " ".join([*before, "$A", *after])
        pair = " ".join([*before, "$A:0", *[f"{t}:0" for t in after], "$B:1", *[f"{t}:1" for t in after]])
        tokens = sorted(set(before + after))
        tokenizer.post_processor = TemplateProcessing(single=single, pair=pair,
                                                      special_tokens=[(t, tokenizer.token_to_id(t)) for t in tokens])
    tokenizer.save(str(out / "tokenizer.json"))


def _card(loaded: LoadedModel, run: dict | None) -> str:
    meta = loaded.meta
    lines = [f"# {loaded.arch} ({meta['preset']}), trained with lmforge", ""]
    if loaded.task:
        lines += [f"Fine-tuned for sequence classification, labels: {', '.join(loaded.task['labels'])}.", ""]
    if run:
        facts = {"task": run.get("task"), "objective": run.get("objective"), "initialisation": run.get("init"),
                 "steps": run.get("steps"), "seconds": run.get("seconds")}
        lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in facts.items() if v is not None]
        for split in ("validation", "test"):
            scores = run.get(split)
            if isinstance(scores, dict):
                shown = ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if isinstance(v, (int, float)))
                lines.append(f"| {split} | {shown} |")
        baselines = run.get("baselines") or {}
        for name, b in baselines.items():
            if isinstance(b, dict) and "accuracy" in b:
                lines.append(f"| baseline: {name} | accuracy {b['accuracy']:.4f} |")
        lines.append("")
    lines += ["Load it with `transformers`:", "", "```python", "from transformers import AutoModel, AutoTokenizer",
              "model = AutoModel.from_pretrained(\"<this folder>\")", "tokenizer = AutoTokenizer.from_pretrained(\"<this folder>\")",
              "```", ""]
    return "\n".join(lines)


def export_model(loaded: LoadedModel, out: str | Path) -> Path:
    """Write ``out``: config, safetensors weights, tokenizer files, README.md; refuses an existing
    non-empty folder."""
    from ..interop.hf import export
    from ..errors import ConfigError

    if loaded.arch in NO_TRANSFORMERS:
        raise InferenceError(f"{loaded.arch} has no transformers counterpart to export to")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InferenceError(f"{out} exists and is not empty; choose a new folder")
    v = loaded.vocab
    try:
        export(loaded.model, out, loaded.tokenizer.directory, pad_token_id=v.pad, bos_token_id=v.bos, eos_token_id=v.eos)
    except ConfigError as exc:
        raise InferenceError(str(exc)) from exc
    _write_tokenizer(loaded, out)
    if loaded.head == "classification" and loaded.task:
        config_path = out / "config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["id2label"] = {str(i): name for i, name in enumerate(loaded.task["labels"])}
        config["label2id"] = {name: i for i, name in enumerate(loaded.task["labels"])}
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    run_metrics = loaded.directory.parent / "metrics.json"
    run = json.loads(run_metrics.read_text(encoding="utf-8")) if run_metrics.is_file() else None
    (out / "README.md").write_text(_card(loaded, run), encoding="utf-8")
    return out
