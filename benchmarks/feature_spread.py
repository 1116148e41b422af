"""Benchmark: does a pretrained model still tell its inputs apart? The spread of the features a
classifier reads (the mean-pooled last layer, ``finetune.pooling: mean``) across a task's training
examples, divided by the norm of their mean, for each architecture's pretrained model beside the
same architecture randomly initialised. A pretrained encoder that ends on the unigram plateau
can learn to ignore its input: its spread falls to about zero, and fine-tuning from it stays at
the majority class (BENCHMARKS.md, Transfer).

    python benchmarks/feature_spread.py [--project DIR] [--arch A ...] [--task T] [--examples 200] [--set KEY=VALUE ...]

Defaults: the project's ``train.architectures`` and first ``finetune.tasks``. A recipe that
fine-tunes text to text (T5's, BART's and Switch's by default) has no classifier to read and is
skipped with a note; with ``finetune.mode: classification`` their encoder's mean is read.
Errors in the arguments are one line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch


def spread(features: torch.Tensor) -> float:
    """Norm of the per-feature standard deviation across rows over the norm of the mean row
    (0 when every row is the same)."""
    if features.dim() != 2 or features.size(0) < 2:
        raise ValueError(f"spread needs a (rows >= 2, features) matrix, got shape {tuple(features.shape)}")
    features = features.double()
    return float(features.std(0).norm() / features.mean(0).norm().clamp_min(1e-12))


@torch.no_grad()
def classifier_input(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the first layer of the model's classifier reads for ``batch``: XLNet's ``summary``,
    else ``classifier`` or ``score`` (GPT), or the ``dense`` layer that opens a classification
    head module (T5's and Switch's ``classifier``, BART's ``head``)."""
    layer = None
    for name in ("summary", "classifier", "score", "head"):
        module = getattr(model, name, None)
        if not isinstance(module, torch.nn.Linear):
            module = getattr(module, "dense", None)
        if isinstance(module, torch.nn.Linear):
            layer = module
            break
    if layer is None:
        raise ValueError(f"{type(model).__name__} has no linear classifier layer (summary / classifier / score / head)")
    seen: list[torch.Tensor] = []
    hook = layer.register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0]))
    try:
        model.eval()
        model(**{k: v for k, v in batch.items() if k != "labels"})
    finally:
        hook.remove()
    return seen[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default=".")
    parser.add_argument("--arch", nargs="+")
    parser.add_argument("--task")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--set", nargs="+", action="extend", default=[], dest="overrides", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    from lmforge import layout
    from lmforge.config import load_params
    from lmforge.errors import LmforgeError
    from lmforge.config.recipes import load_recipe
    from lmforge.finetuning.features import collate, encode_split, pad_id, tokenizer_dir_for
    from lmforge.finetuning.tasks import load_task
    from lmforge.training.finetune_model import build_finetune_model, head_model

    project = Path(args.project).resolve()
    if args.examples < 2:
        print(f"feature_spread: --examples must be at least 2, got {args.examples}", file=sys.stderr)
        return 2
    try:
        os.chdir(project)
        params = load_params("params.yaml", args.overrides)
        task = load_task(args.task or params.finetune.tasks[0], params, max_train=args.examples)
        print(f"| architecture | pretrained | random | task `{task.name}`, {len(task.splits['train'])} training examples |")
        print("|---|---:|---:|---|")
        for arch in args.arch or params.train.architectures:
            mode = load_recipe(params, arch).finetune.mode
            if mode == "text_to_text":
                print(f"| {arch} | – | – | text to text: no classifier |")
                continue
            tok = tokenizer_dir_for(arch, Path(params.tokenizer.output))
            batch = collate(encode_split(task, "train", arch, tok, params.finetune.max_length, mode=mode),
                            pad_id(arch, tok))
            n = len(task.label_names)
            pretrained, preset, overrides, head = build_finetune_model(
                layout.pretrained_model_dir(params, arch), arch, "classification", n, pooling="mean")
            torch.manual_seed(params.train.seed)
            scratch, _, _ = head_model(arch, "classification", preset, overrides, head, n, pooling="mean")
            values = [spread(classifier_input(m, batch)) for m in (pretrained, scratch)]
            print(f"| {arch} | {values[0]:.4f} | {values[1]:.4f} | |")
    except LmforgeError as exc:
        print(f"feature_spread: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
