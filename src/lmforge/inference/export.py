"""``lmforge export``: a trained model as a ``transformers`` folder, with its tokenizer and a
model card; or (``--format onnx``) as an ONNX graph beside the same tokenizer and card.

The weights go through ``interop.hf.export`` (the converted model gives our outputs). The
tokenizer is the trained one, with a post-processor that adds the special tokens the
architecture's inputs start and end with, so that ``AutoTokenizer`` and ``pipeline`` build the
inputs the model was trained on: ``[CLS] A [SEP]`` (BERT, ERNIE, ALBERT), ``A <sep> <cls>``
(XLNet), ``A </s>`` (T5, Switch), ``<s> A </s>`` (BART), ``<s> A </s>`` for a GPT classifier and
nothing for GPT's language model (its prompts continue). A fine-tuned classifier carries its
label names (``id2label`` / ``label2id``). ``README.md`` says what the model is: architecture,
objective or task, training steps and the metrics of its run.

ONNX (:func:`export_onnx`): ``model.onnx`` maps ``input_ids`` and ``attention_mask`` (plus
``token_type_ids`` where the architecture has segments, ``decoder_input_ids`` for BART and T5)
to the head's ``logits``, with the batch and the lengths left free; ``onnx.json`` names the
inputs and the labels. It goes through ``torch.export`` (``torch.onnx.export(dynamo=True)``),
so the graph is the model's own code, the masked path included; ONNX Runtime gives our logits.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .loading import InferenceError, LoadedModel

NO_TRANSFORMERS = ("elmo", "transformer_xl")
# architectures whose exported graph would not compute the model: why
NO_ONNX = {
    "elmo": "its character CNN and LSTMs do not go through torch.export",
    "switch": "its expert capacity follows the batch's token count, which an exported graph fixes at the example's",
}
ENCODER_DECODERS = ("bart", "t5")


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


def _card(loaded: LoadedModel, usage: list[str]) -> str:
    """README.md: the model, its run's task, steps and metrics (``metrics.json`` beside the model
    folder, when there is one), then ``usage`` (how to load the format written)."""
    run_metrics = loaded.directory.parent / "metrics.json"
    run = json.loads(run_metrics.read_text(encoding="utf-8")) if run_metrics.is_file() else None
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
    return "\n".join(lines + usage)


def _new_folder(out: str | Path) -> Path:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InferenceError(f"{out} exists and is not empty; choose a new folder")
    return out


def export_model(loaded: LoadedModel, out: str | Path) -> Path:
    """Write ``out``: config, safetensors weights, tokenizer files, README.md; refuses an existing
    non-empty folder."""
    from ..interop.hf import export
    from ..errors import ConfigError

    if loaded.arch in NO_TRANSFORMERS:
        raise InferenceError(f"{loaded.arch} has no transformers counterpart to export to")
    if loaded.head in ("token_classification", "span_extraction"):
        raise InferenceError(f"{loaded.directory}: a {loaded.head} model; export writes language models and "
                             "sequence classifiers only")
    out = _new_folder(out)
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
    usage = ["Load it with `transformers`:", "", "```python", "from transformers import AutoModel, AutoTokenizer",
             "model = AutoModel.from_pretrained(\"<this folder>\")",
             "tokenizer = AutoTokenizer.from_pretrained(\"<this folder>\")", "```", ""]
    (out / "README.md").write_text(_card(loaded, usage), encoding="utf-8")
    return out


class _Logits(torch.nn.Module):
    """The model as a function of named tensors to its head's logits (what the graph exports)."""

    def __init__(self, model: torch.nn.Module, names: list[str]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, tensors))).logits


def onnx_inputs(loaded: LoadedModel) -> list[str]:
    """The graph's inputs, in order."""
    import inspect

    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(loaded.model.forward).parameters:
        names.append("token_type_ids")
    if loaded.arch in ENCODER_DECODERS:
        names.append("decoder_input_ids")
    return names


def export_onnx(loaded: LoadedModel, out: str | Path) -> Path:
    """Write ``out``: ``model.onnx``, ``onnx.json``, the tokenizer and README.md; refuses an
    existing non-empty folder and the architectures of ``NO_ONNX``."""
    if loaded.arch in NO_ONNX:
        raise InferenceError(f"{loaded.arch} cannot be exported to ONNX: {NO_ONNX[loaded.arch]}")
    try:
        import onnxscript  # noqa: F401  (torch.onnx's exporter needs it)
    except ImportError:
        raise InferenceError("ONNX export needs the onnx extra: pip install 'lmforge[onnx]'") from None
    out = _new_folder(out)
    names = onnx_inputs(loaded)
    model = loaded.model.eval()
    ordinary = torch.tensor(sorted(set(range(loaded.vocab.size)) - set(loaded.vocab.special_ids)))
    g = torch.Generator().manual_seed(0)
    example = {"input_ids": ordinary[torch.randint(len(ordinary), (2, 8), generator=g)],
               "attention_mask": torch.tensor([[1] * 8, [1] * 6 + [0] * 2]),
               "token_type_ids": torch.tensor([[0] * 4 + [1] * 4] * 2),
               "decoder_input_ids": ordinary[torch.randint(len(ordinary), (2, 4), generator=g)]}
    batch = torch.export.Dim("batch", min=1)
    length = torch.export.Dim("length", min=2, max=loaded.max_positions or 8192)
    target = torch.export.Dim("target_length", min=2, max=loaded.max_positions or 8192)
    shapes = tuple({0: batch, 1: target if n == "decoder_input_ids" else length} for n in names)
    out.mkdir(parents=True, exist_ok=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(_Logits(model, names), tuple(example[n] for n in names), str(out / "model.onnx"),
                              input_names=names, output_names=["logits"], dynamic_shapes=(shapes,), dynamo=True,
                              verbose=False)
        except Exception as exc:  # the exporter's own errors are long; one line says which model failed
            for f in out.iterdir():
                f.unlink()
            raise InferenceError(f"{loaded.arch} could not be exported to ONNX: {type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    described = {"inputs": names, "output": "logits", "architecture": loaded.arch, "head": loaded.head}
    if loaded.head == "classification" and loaded.task:
        described["labels"] = list(loaded.task["labels"])
    (out / "onnx.json").write_text(json.dumps(described, indent=2) + "\n", encoding="utf-8")
    _write_tokenizer(loaded, out)
    usage = ["Run it with ONNX Runtime:", "", "```python", "import onnxruntime",
             "session = onnxruntime.InferenceSession(\"<this folder>/model.onnx\")",
             f"logits = session.run([\"logits\"], {{{', '.join(f'{n!r}: ...' for n in names)}}})[0]", "```", ""]
    (out / "README.md").write_text(_card(loaded, usage), encoding="utf-8")
    return out
