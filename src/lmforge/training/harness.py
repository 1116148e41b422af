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


def folder_scorer(folder: Path) -> CausalScorer:
    """The scorer of a model folder: an lmforge one (``lmforge_model.json``; its tokenizer beside
    it), or a ``transformers`` causal LM (``config.json`` and ``tokenizer.json``, as ``lmforge
    export`` writes one), read after its ``eos`` (else ``bos``) token as our GPT is read after
    ``eos``: an exported model scores as the folder it came from."""
    from ..evaluation.harness import HarnessError

    folder = Path(folder)
    if (folder / "lmforge_model.json").is_file():
        from ..inference.loading import load

        loaded = load(folder)
        reason = not_applicable(_architecture(loaded))
        if reason is not None:
            raise HarnessError(f"{folder}: {_architecture(loaded)}: {reason}")
        return scorer(loaded.model.eval(), loaded.tokenizer)
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        raise HarnessError(f"{folder}: neither an lmforge model folder (lmforge_model.json) nor a transformers "
                           "folder with config.json and tokenizer.json")
    import transformers
    from tokenizers import Tokenizer

    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    except (ValueError, OSError) as exc:
        raise HarnessError(f"{folder}: not a causal LM transformers loads ({str(exc).splitlines()[0]})") from exc
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    # the document separator a causal LM trained on packed documents reads before each one (GPT-2's
    # bos and eos are that one token); bos where a config names no eos
    start = model.config.eos_token_id if model.config.eos_token_id is not None else model.config.bos_token_id
    if start is None:
        raise HarnessError(f"{folder}: its config names no eos_token_id or bos_token_id to read the contexts after")
    window = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None)
    return CausalScorer(model, lambda text: tokenizer.encode(text, add_special_tokens=False).ids, prefix=[start],
                        window=window)


def _architecture(loaded) -> str:
    from ..models.registry import preset_architectures

    return preset_architectures().get(loaded.meta.get("preset"), "?")


def folder_scores(params: Params, folder: Path, specs: list[str]) -> dict:
    """``{task: {metric: value}}`` of the model in ``folder`` on ``specs`` (the built-in
    ``docstring_next`` written from this project's corpus when listed)."""
    from ..evaluation.lm_eval_run import require_lm_eval, run_tasks

    require_lm_eval()
    local = {harness_task.NAME: default_task(params)} if harness_task.NAME in specs else {}
    return run_tasks(folder_scorer(folder), specs, local, name=f"lmforge-{Path(folder).name}")
