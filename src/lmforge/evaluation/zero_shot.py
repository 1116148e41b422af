"""The evaluate stage's zero-shot harness (``evaluate.harness``): each task scored for an
architecture's pretrained model and for its untrained floor, the same architecture with random
weights (``train.seed``, the from-scratch control's seed), by lm-eval where it is installed (else
the built-in task by our own scorer, with lm-eval's definitions). The built-in ``docstring_next``
is written from the validation split of the clean corpus (documents pretraining never trained on)
under ``<evaluate.output>/harness/``. Architectures no scorer reads are listed as not applicable,
with the reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from .. import layout
from ..config import Params
from . import harness_task
from ..errors import ConfigError
from .harness import (CausalScorer, HarnessError, LeftToRight, Seq2SeqScorer, not_applicable,
                                  score_questions)
from .lm_eval_run import INSTALL


def task_dir(params: Params) -> Path:
    return layout.report_dir(params) / "harness"


def default_task(params: Params) -> Path:
    """``docstring_next`` from the validation documents (rewritten each time: the same documents and
    seed give the same files); its YAML's path."""
    from ..splits import split_of
    from ..cleaning.output import iter_clean

    held_out = [(i, t) for i, t in iter_clean(layout.corpus_dir(params)) if split_of(i, params.split) == "validation"]
    rows = harness_task.next_sentence_questions(held_out, seed=params.train.seed,
                                                max_questions=params.evaluate.harness_questions)
    return harness_task.write_task(rows, task_dir(params))


def scorer(model: torch.nn.Module, tokenizer, arch: str = "gpt") -> CausalScorer | Seq2SeqScorer:
    """``arch``'s model read as lm-eval reads its kind of LM, each framed as it read text while
    pretraining: GPT and Transformer-XL after ``eos`` (their document separator), XLNet left to
    right after ``sep``, T5 and Switch with ``eos`` closing the encoder's input, BART with ``bos``
    and ``eos`` around it and ``bos`` opening its decoder."""
    vocab = tokenizer.vocab
    config = model.config

    def encode(text: str) -> list[int]:
        return tokenizer.encode([text])[0]

    if arch == "gpt":
        return CausalScorer(model, encode, prefix=[vocab.eos], window=config.n_positions)
    if arch == "transformer_xl":  # relative positions: no table to outgrow, the whole input is one segment
        return CausalScorer(model, encode, prefix=[vocab.eos])
    if arch == "xlnet":
        return CausalScorer(LeftToRight(model, filler=vocab.pad if vocab.pad is not None else 0), encode,
                            prefix=[vocab.sep])
    if arch in ("t5", "switch"):
        return Seq2SeqScorer(model, encode, eos=vocab.eos, decoder_start=config.decoder_start_id, pad=config.pad_id,
                             encoder_suffix=[vocab.eos])
    if arch == "bart":
        return Seq2SeqScorer(model, encode, eos=vocab.eos, decoder_start=config.decoder_start_id, pad=config.pad_id,
                             encoder_prefix=[vocab.bos], encoder_suffix=[vocab.eos], decoder_prefix=[vocab.bos],
                             window=config.max_positions)
    raise HarnessError(f"{arch}: {not_applicable(arch)}")


def untrained_twin(loaded, seed: int) -> torch.nn.Module:
    """The pretrained model's architecture, preset and overrides with random weights from ``seed``."""
    from ..models.registry import build_model

    meta = loaded.meta
    torch.manual_seed(seed)
    return build_model(meta["preset"], head=meta.get("head"), num_labels=meta.get("num_labels"),
                       **meta.get("config_overrides", {})).eval()


def lm_eval_version() -> str | None:
    """lm-eval's version where the ``eval`` extra is installed, else None."""
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import version

    return version("lm_eval")


def require_scorer_for(specs: list[str]) -> None:
    """One clear line when a task other than the built-in ones needs lm-eval and it is missing
    (before any corpus is read)."""
    foreign = [s for s in specs if s != harness_task.NAME]
    if foreign and lm_eval_version() is None:
        raise ConfigError(f"evaluate.harness: task {foreign[0]!r} needs EleutherAI's lm-eval, which is not "
                          f"installed: {INSTALL} (the built-in {harness_task.NAME} is scored without it)")


def score_tasks(scorer_: CausalScorer | Seq2SeqScorer, specs: list[str], local: dict[str, Path], *,
                name: str) -> tuple[dict, str]:
    """(``{task: {metric: value, n}}``, who scored them): lm-eval where installed; without it,
    the built-in tasks by :func:`~lmforge.evaluation.harness.score_questions`, which computes
    lm-eval's acc, acc_norm and acc_bytes (a test holds the two equal on the same questions)."""
    version = lm_eval_version()
    if version is not None:
        from .lm_eval_run import run_tasks

        return run_tasks(scorer_, specs, local, name=name), f"lm-eval {version}"
    require_scorer_for(specs)
    return {s: score_questions(scorer_, harness_task.read_questions(local[s])) for s in specs}, \
        "lmforge (lm-eval's definitions; lm-eval not installed)"


def harness_scores(params: Params, arch: str, *, log: Callable[[str], None] = print) -> dict:
    """``{tasks, scored_by, pretrained: {task: {metric: value}}, untrained: {...}}``, or
    ``{tasks, not_applicable: reason}`` for an architecture the scorers do not read; a built-in
    task the corpus is too small for is left out and named under ``skipped`` with the reason."""
    specs = list(params.evaluate.harness)
    require_scorer_for(specs)  # before the corpus is read: one clear line when the extra is missing
    reason = not_applicable(arch)
    if reason is not None:
        log(f"evaluate {arch}: harness not applicable ({reason})")
        return {"tasks": specs, "not_applicable": reason}
    from ..inference.loading import load

    out: dict = {"tasks": specs}
    local: dict[str, Path] = {}
    scored = specs
    if harness_task.NAME in specs:
        try:
            local[harness_task.NAME] = default_task(params)
        except HarnessError as exc:  # a corpus too small for the default task: skipped, said so
            out["skipped"] = {harness_task.NAME: str(exc)}
            log(f"evaluate {arch}: harness skips {harness_task.NAME} ({exc})")
            scored = [s for s in specs if s != harness_task.NAME]
            if not scored:
                return out
    loaded = load(layout.pretrained_model_dir(params, arch))
    for name, model in (("pretrained", loaded.model), ("untrained", untrained_twin(loaded, params.train.seed))):
        try:
            out[name], out["scored_by"] = score_tasks(scorer(model, loaded.tokenizer, arch), scored, local,
                                                      name=f"lmforge-{arch}-{name}")
        except HarnessError as exc:  # a question the model cannot read: the stage's other results still count
            log(f"evaluate {arch}: harness skipped ({exc})")
            return {"tasks": specs, "skipped": {s: str(exc) for s in scored}}
        log(f"evaluate {arch}: harness {name}: " + "; ".join(
            f"{t} acc {s.get('acc', float('nan')):.3f} acc_norm {s.get('acc_norm', float('nan')):.3f}"
            for t, s in out[name].items()))
    return out


def folder_scorer(folder: Path) -> CausalScorer | Seq2SeqScorer:
    """The scorer of a model folder: an lmforge one (``lmforge_model.json``; its tokenizer beside
    it), or a ``transformers`` causal LM (``config.json`` and ``tokenizer.json``, as ``lmforge
    export`` writes one), read after its ``eos`` (else ``bos``) token as our GPT is read after
    ``eos``: an exported model scores as the folder it came from."""
    folder = Path(folder)
    if (folder / "lmforge_model.json").is_file():
        from ..inference.loading import load

        loaded = load(folder)
        reason = not_applicable(_architecture(loaded))
        if reason is not None:
            raise HarnessError(f"{folder}: {_architecture(loaded)}: {reason}")
        return scorer(loaded.model.eval(), loaded.tokenizer, _architecture(loaded))
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        raise HarnessError(f"{folder}: neither an lmforge model folder (lmforge_model.json) nor a transformers "
                           "folder with config.json and tokenizer.json")
    import transformers
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
        if getattr(config, "is_encoder_decoder", False):
            return _seq2seq_folder_scorer(folder, transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval(),
                                          tokenizer)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    except (ValueError, OSError) as exc:
        raise HarnessError(f"{folder}: not a causal or seq2seq LM transformers loads "
                           f"({str(exc).splitlines()[0]})") from exc
    # the document separator a causal LM trained on packed documents reads before each one (GPT-2's
    # bos and eos are that one token); bos where a config names no eos
    start = model.config.eos_token_id if model.config.eos_token_id is not None else model.config.bos_token_id
    if start is None:
        raise HarnessError(f"{folder}: its config names no eos_token_id or bos_token_id to read the contexts after")
    window = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None)
    return CausalScorer(model, lambda text: tokenizer.encode(text, add_special_tokens=False).ids, prefix=[start],
                        window=window)


def _seq2seq_folder_scorer(folder: Path, model, tokenizer) -> Seq2SeqScorer:
    """A ``transformers`` encoder-decoder framed as :func:`scorer` frames ours of its kind."""
    c = model.config
    kinds = {"t5": "t5", "mt5": "t5", "switch_transformers": "t5", "bart": "bart", "mbart": "bart"}
    kind = kinds.get(c.model_type)
    if kind is None or c.eos_token_id is None or c.decoder_start_token_id is None:
        raise HarnessError(f"{folder}: a {c.model_type} encoder-decoder: only T5, Switch and BART framings are known")
    frame = {"encoder_suffix": [c.eos_token_id]}
    if kind == "bart":
        if c.bos_token_id is None:
            raise HarnessError(f"{folder}: its config names no bos_token_id (BART's framing reads one)")
        frame.update(encoder_prefix=[c.bos_token_id], decoder_prefix=[c.bos_token_id],
                     window=getattr(c, "max_position_embeddings", None))
    return Seq2SeqScorer(model, lambda text: tokenizer.encode(text, add_special_tokens=False).ids, eos=c.eos_token_id,
                         decoder_start=c.decoder_start_token_id, pad=c.pad_token_id or 0, **frame)


def _architecture(loaded) -> str:
    from ..models.registry import preset_architectures

    return preset_architectures().get(loaded.meta.get("preset"), "?")


def folder_scores(params: Params, folder: Path, specs: list[str]) -> dict:
    """``{task: {metric: value}}`` of the model in ``folder`` on ``specs`` (the built-in
    ``docstring_next`` written from this project's corpus when listed)."""
    require_scorer_for(specs)
    local = {harness_task.NAME: default_task(params)} if harness_task.NAME in specs else {}
    return score_tasks(folder_scorer(folder), specs, local, name=f"lmforge-{Path(folder).name}")[0]
