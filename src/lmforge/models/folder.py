"""A model folder: ``model.safetensors`` plus the ``build_model`` arguments that rebuild it
(``lmforge_model.json``) and optional extra files such as the tokenizer. Loading never unpickles.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from ..errors import ConfigError

__all__ = ["META_FILE", "MODEL_FILE", "check_model_dir", "load_model_dir", "read_meta", "save_model_dir"]

MODEL_FILE = "model.safetensors"
META_FILE = "lmforge_model.json"


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under torch.compile / DataParallel / DistributedDataParallel wrappers."""
    while True:
        if hasattr(model, "_orig_mod") and isinstance(model._orig_mod, torch.nn.Module):
            model = model._orig_mod
        elif isinstance(model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)):
            model = model.module
        else:
            return model


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _rebuild(preset: str, head: str | None, num_labels: int | None, overrides: dict, *, meta_device: bool = False,
             max_modules: int = 20_000) -> torch.nn.Module:
    """``build_model`` from stored arguments; JSON turned tuple-valued options (e.g. ELMo's
    ``filters``) into lists, so those become tuples again where the preset's value is a tuple.
    ``meta_device``: built with ``build_on_meta`` (shapes only, errors as ``ConfigError``)."""
    from .registry import build_model, build_on_meta, preset_config

    defaults = preset_config(preset)
    overrides = {k: _as_tuples(v) if isinstance(getattr(defaults, k, None), tuple) and isinstance(v, list) else v
                 for k, v in overrides.items()}
    if meta_device:
        return build_on_meta(preset, head=head, num_labels=num_labels, max_modules=max_modules, **overrides)
    return build_model(preset, head=head, num_labels=num_labels, **overrides)


def read_meta(model_dir: str | Path) -> dict:
    """The contents of ``<model_dir>/lmforge_model.json``; a ``FileNotFoundError`` unless both it
    and the weights are there, a ``ConfigError`` (one line) when it is not the record
    ``save_model_dir`` writes (a JSON object with a preset name, a head, a label count and a
    mapping of config overrides)."""
    meta_path = Path(model_dir) / META_FILE
    if not meta_path.is_file() or not (Path(model_dir) / MODEL_FILE).is_file():
        raise FileNotFoundError(f"{model_dir} is not an lmforge model directory (needs {META_FILE} and {MODEL_FILE})")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{meta_path}: not a JSON record ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{meta_path}: not a JSON object")
    num_labels = meta.get("num_labels")
    for key, ok in (("preset", isinstance(meta.get("preset"), str)),
                    ("head", meta.get("head") is None or isinstance(meta.get("head"), str)),
                    ("num_labels", num_labels is None or (type(num_labels) is int and num_labels >= 1)),
                    ("config_overrides", isinstance(meta.get("config_overrides", {}), dict))):
        if not ok:
            raise ConfigError(f"{meta_path}: {key} is {meta.get(key)!r}, not what save_model_dir writes")
    return meta


def _file_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape in the safetensors file ``path``, from its header only (no weight is
    read); the library checks the header against the file's length."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as exc:  # safetensors' SafetensorError and the OS's errors: a file that is not what it claims
        raise ConfigError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def check_model_dir(model_dir: str | Path) -> dict:
    """Check that ``model_dir``'s weights are those of the model its ``lmforge_model.json``
    describes, before any memory is allocated for either: the model is built on the meta device
    (shapes only) and its parameter names and shapes compared with the safetensors header. A
    record that cannot be built or does not match the weights is a ``ConfigError`` naming the
    difference. Returns the record."""
    model_dir = Path(model_dir)
    meta = read_meta(model_dir)
    stored = _file_shapes(model_dir / MODEL_FILE)
    try:
        # a model has at most a couple of modules per tensor it stores: a record describing far
        # more (a layer count of millions) is refused before its meta build takes the time
        model = _rebuild(meta["preset"], meta.get("head"), meta.get("num_labels"), meta.get("config_overrides") or {},
                         meta_device=True, max_modules=8 * len(stored) + 256)
    except ConfigError as exc:
        raise ConfigError(f"{model_dir / META_FILE}: {exc}") from None
    tied: dict[int, list[str]] = {}  # the names of each tensor (tied weights have several; the file keeps one)
    expected: dict[str, tuple[int, ...]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        tied.setdefault(id(tensor), []).append(name)
        expected[name] = tuple(tensor.shape)
    unknown = sorted(set(stored) - set(expected))
    missing = [names[0] for names in tied.values() if not any(n in stored for n in names)]
    differ = [f"{n} {stored[n]} where the record gives {expected[n]}" for n in sorted(stored)
              if n in expected and stored[n] != expected[n]]
    if unknown or missing or differ:
        what = differ[:2] or ([f"unknown tensor(s) {unknown[:3]}"] if unknown else []) + \
            ([f"missing tensor(s) {missing[:3]}"] if missing else [])
        raise ConfigError(f"{model_dir}: the weights in {MODEL_FILE} are not those of the model {META_FILE} "
                          f"describes ({meta['preset']}, head {meta.get('head')}): {'; '.join(what)}")
    return meta


def save_model_dir(model: torch.nn.Module, preset: str, head: str, config_overrides: dict, out_dir: str | Path,
                   num_labels: int | None = None, extra_files: dict[str, Path] | None = None) -> Path:
    """Write ``out_dir/model.safetensors`` (shared / tied tensors stored once),
    ``out_dir/lmforge_model.json`` (the ``build_model`` arguments and the lmforge version) and a
    copy of each ``extra_files`` entry (a file or a directory, e.g. a tokenizer) at
    ``out_dir/<key>``. The arguments are checked first: a model built from them (on the meta
    device, so for free) must have the same parameter names and shapes. Written into a temporary
    sibling and moved into place with ``os.replace``; an existing ``out_dir`` is replaced (moved
    aside first, so that step alone is not atomic)."""
    from safetensors.torch import save_model

    from .registry import ARCHITECTURES, PRESET_ARCHITECTURE

    model = _unwrap(model)
    out_dir = Path(out_dir)
    overrides = dict(config_overrides or {})
    if preset not in PRESET_ARCHITECTURE:
        raise ConfigError(f"unknown model preset {preset!r}")
    head = head or ARCHITECTURES[PRESET_ARCHITECTURE[preset]].default_head
    meta = {"preset": preset, "head": head, "num_labels": num_labels, "config_overrides": overrides,
            "lmforge_version": __version__}
    try:
        meta_text = json.dumps(meta, indent=2, sort_keys=True)
    except TypeError as exc:
        raise ConfigError(f"config_overrides must be JSON-serialisable: {exc}") from exc
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in _rebuild(preset, head, num_labels, json.loads(meta_text)
                                                           ["config_overrides"]).state_dict().items()}
    actual = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if expected != actual:
        differ = sorted(set(expected) ^ set(actual)) or sorted(k for k in expected if expected[k] != actual[k])
        raise ConfigError(f"the model does not match build_model({preset!r}, head={head!r}, "
                          f"num_labels={num_labels}, **{overrides}): e.g. {differ[:5]}")
    reserved = {MODEL_FILE, META_FILE}
    for key in extra_files or {}:
        parts = Path(key).parts
        if not parts or Path(key).is_absolute() or ".." in parts or parts[0] in reserved:
            raise ConfigError(f"extra_files key {key!r} must be a relative path other than {sorted(reserved)}")

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        save_model(model, str(tmp / MODEL_FILE), metadata={"format": "pt"})
        (tmp / META_FILE).write_text(meta_text + "\n", encoding="utf-8")
        for key, source in (extra_files or {}).items():
            source, destination = Path(source), tmp / key
            destination.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, destination)
            else:
                shutil.copy2(source, destination)
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / "dir")
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def load_model_dir(model_dir: str | Path, *, checked: dict | None = None) -> torch.nn.Module:
    """Rebuild the model of a ``save_model_dir`` directory with ``build_model`` and load its
    safetensors weights (strict), on CPU, in eval mode, once :func:`check_model_dir` found the
    record and the weights agree (``checked``: the record a caller's own call of it returned, not
    checked again). Never unpickles."""
    from safetensors.torch import load_model

    model_dir = Path(model_dir)
    meta = checked if checked is not None else check_model_dir(model_dir)  # sizes against the weights first
    model = _rebuild(meta["preset"], meta.get("head"), meta.get("num_labels"), meta.get("config_overrides") or {})
    load_model(model, str(model_dir / MODEL_FILE), strict=True)
    return model.eval()
