"""Convert models to and from Hugging Face ``transformers``, and export for ``from_pretrained``.

``to_hf(model)`` and ``from_hf(hf_model)`` pick the converter by architecture; the converted
model gives the same outputs (parity tests in tests/interop/). ``export(model, directory)``
writes a directory that ``transformers.AutoModel*.from_pretrained`` loads, with the trained
tokenizer's files next to it when ``tokenizer_dir`` is given.

Covered: BERT and ERNIE (pre-training, masked LM, sequence classification), ALBERT (the same),
GPT-2 and OpenAI GPT (LM, sequence classification), XLNet (LM, classification), BART, T5 (v1.0 and
v1.1) and Switch Transformer (conditional generation; BART and T5 also classification). ELMo
has no ``transformers`` counterpart, and the installed ``transformers`` no longer has
Transformer-XL.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from torch import nn

from ..models import albert, bart, bert, ernie, gpt, switch, t5, xlnet
from ..errors import ConfigError


def to_hf(model: nn.Module, **token_ids: int | None) -> nn.Module:
    """Our model -> the ``transformers`` model of the same architecture and head, same weights.
    ``token_ids`` (``pad_token_id``, ``bos_token_id``, ``eos_token_id``) go into GPT / ALBERT configs."""
    from . import _albert, _bart, _bert, _gpt, _t5, _xlnet

    config = getattr(model, "config", None)
    if isinstance(config, switch.SwitchConfig):  # before T5: a Switch config is a T5 config
        return _t5.switch_to_hf(model)
    if isinstance(config, t5.T5Config):
        return _t5.t5_to_hf(model)
    if isinstance(config, bart.BartConfig):
        return _bart.bart_to_hf(model)
    if isinstance(config, xlnet.XLNetConfig):
        return _xlnet.xlnet_to_hf(model, **token_ids)
    if isinstance(config, ernie.ErnieConfig):
        return _bert.ernie_to_hf(model)
    if isinstance(config, bert.BertConfig):
        return _bert.bert_to_hf(model)
    if isinstance(config, albert.AlbertConfig):
        return _albert.albert_to_hf(model, **token_ids)
    if isinstance(config, gpt.GPTConfig):
        return (_gpt.gpt2_to_hf if config.norm_first else _gpt.openai_gpt_to_hf)(model, **token_ids)
    raise ConfigError(f"no transformers counterpart for {type(model).__name__}")


def from_hf(hf_model: nn.Module) -> nn.Module:
    """A ``transformers`` model (BERT, ERNIE, ALBERT, GPT-2, OpenAI GPT, XLNet, BART, T5, Switch) -> ours, same weights."""
    from . import _albert, _bart, _bert, _gpt, _t5, _xlnet

    model_type = getattr(getattr(hf_model, "config", None), "model_type", None)
    converters = {"bert": _bert.bert_from_hf, "ernie": _bert.ernie_from_hf, "albert": _albert.albert_from_hf,
                  "gpt2": _gpt.gpt2_from_hf, "openai-gpt": _gpt.openai_gpt_from_hf, "xlnet": _xlnet.xlnet_from_hf,
                  "bart": _bart.bart_from_hf, "t5": _t5.t5_from_hf, "switch_transformers": _t5.switch_from_hf}
    if model_type not in converters:
        raise ConfigError(f"no converter for transformers model type {model_type!r}; known: {sorted(converters)}")
    return converters[model_type](hf_model)


def export(model: nn.Module, directory: str | Path, tokenizer_dir: str | Path | None = None, **token_ids: int | None) -> Path:
    """Write ``model`` as a ``transformers`` directory (config + safetensors weights), plus the
    tokenizer files from ``tokenizer_dir``; returns the directory."""
    out = Path(directory)
    to_hf(model, **token_ids).save_pretrained(str(out))
    if tokenizer_dir is not None:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            src = Path(tokenizer_dir) / name
            if src.exists():
                shutil.copy2(src, out / name)
    return out
