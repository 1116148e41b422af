"""The evaluate stage's zero-shot harness (``evaluate.harness``): each task scored by lm-eval for
an architecture's pretrained model and for its untrained floor, the same architecture with random
weights (``train.seed``, the from-scratch control's seed). The built-in ``docstring_next`` is
written from the validation split of the clean corpus (documents pretraining never trained on)
under ``<evaluate.output>/harness/``. Architectures the scorer does not read are listed as not
applicable, with the reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from .. import layout
from ..config import Params
from ..evaluation import harness_task
from ..evaluation.harness import CausalScorer, not_applicable


def task_dir(params: Params) -> Path:
    return layout.report_dir(params) / "harness"


def default_task(params: Params) -> Path:
    """``docstring_next`` from the validation documents (rewritten each time: the same documents and
    seed give the same files); its YAML's path."""
    from ..splits import split_of
    from ..tokenization.corpus import iter_clean

    held_out = [(i, t) for i, t in iter_clean(layout.corpus_dir(params)) if split_of(i, params.split) == "validation"]
    rows = harness_task.next_sentence_questions(held_out, seed=params.train.seed,
                                                max_questions=params.evaluate.harness_questions)
    return harness_task.write_task(rows, task_dir(params))


def scorer(model: torch.nn.Module, tokenizer) -> CausalScorer:
    """Our GPT read as lm-eval reads a causal LM, after ``eos`` (its document separator)."""
    return CausalScorer(model, lambda text: tokenizer.encode([text])[0], prefix=[tokenizer.vocab.eos],
                        window=getattr(model.config, "n_positions", None))


def untrained_twin(loaded, seed: int) -> torch.nn.Module:
    """The pretrained model's architecture, preset and overrides with random weights from ``seed``."""
    from ..models.registry import build_model

    meta = loaded.meta
    torch.manual_seed(seed)
    return build_model(meta["preset"], head=meta.get("head"), num_labels=meta.get("num_labels"),
                       **meta.get("config_overrides", {})).eval()


def harness_scores(params: Params, arch: str, *, log: Callable[[str], None] = print) -> dict:
    """``{tasks, pretrained: {task: {metric: value}}, untrained: {...}}``, or
    ``{tasks, not_applicable: reason}`` for an architecture the scorer does not read."""
    from ..evaluation.lm_eval_run import require_lm_eval, run_tasks

    specs = list(params.evaluate.harness)
    require_lm_eval()  # before the corpus is read: one clear line when the extra is missing
    reason = not_applicable(arch)
    if reason is not None:
        log(f"evaluate {arch}: harness not applicable ({reason})")
        return {"tasks": specs, "not_applicable": reason}
    from ..inference.loading import load

    local = {harness_task.NAME: default_task(params)} if harness_task.NAME in specs else {}
    loaded = load(layout.pretrained_model_dir(params, arch))
    out: dict = {"tasks": specs}
    for name, model in (("pretrained", loaded.model), ("untrained", untrained_twin(loaded, params.train.seed))):
        out[name] = run_tasks(scorer(model, loaded.tokenizer), specs, local, name=f"lmforge-{arch}-{name}")
        log(f"evaluate {arch}: harness {name}: " + "; ".join(
            f"{t} acc {s.get('acc', float('nan')):.3f} acc_norm {s.get('acc_norm', float('nan')):.3f}"
            for t, s in out[name].items()))
    return out
