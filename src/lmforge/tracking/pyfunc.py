"""An lmforge model folder behind MLflow's pyfunc interface, and the pip requirements it is
logged with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mlflow
import mlflow.pyfunc
import pandas as pd
import torch

from ..models.folder import load_model_dir

__all__ = ["LmforgePyfunc", "pip_requirements", "text_signature"]


def pip_requirements() -> list[str]:
    """What the pyfunc model needs, pinned to this environment; lmforge itself (not on PyPI) must
    be installed where the model is served (``env_manager="local"``)."""
    from importlib.metadata import PackageNotFoundError, version

    requirements = [f"mlflow=={mlflow.__version__}", f"torch=={torch.__version__.split('+')[0]}"]
    for package in ("safetensors", "numpy", "pandas"):
        try:
            requirements.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            requirements.append(package)
    return requirements


def _as_batch_tensor(name: str, column: Any) -> torch.Tensor:
    import numpy as np

    if hasattr(column, "tolist"):
        column = column.tolist()
    try:
        array = np.asarray([np.asarray(row) for row in column] if isinstance(column, list) else column)
    except ValueError as exc:
        raise ValueError(f"{name!r}: rows differ in length; pad them (and pass an attention_mask)") from exc
    if array.dtype == object:
        raise ValueError(f"{name!r}: rows differ in length; pad them (and pass an attention_mask)")
    if array.ndim == 1:  # one example given as a flat list
        array = array[None]
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.long() if not tensor.is_floating_point() else tensor


class LmforgePyfunc(mlflow.pyfunc.PythonModel):
    """An lmforge model directory behind MLflow's pyfunc interface.

    ``predict`` takes a pandas DataFrame, or a dict, whose columns are arguments of the model's
    ``forward`` (``input_ids``, optionally ``attention_mask``, ``token_type_ids``,
    ``decoder_input_ids``...), one row per example, each cell a list of ids; rows must be padded to
    one length. It returns the main head's logits as a float32 numpy array, e.g. (batch, length,
    vocab) for a language model or (batch, num_labels) for a classifier (the hidden states for a
    model without logits). Example: ``predict(None, {"input_ids": [[5, 8, 13], [2, 3, 4]]})``.

    A fine-tuned model (its folder holds ``task.json``) also takes texts: a DataFrame with a
    ``text`` column (and ``text_pair`` for a pair task) gives a DataFrame of ``label``, ``score``
    (its probability) and ``p_<label>`` per label, as ``lmforge predict`` does; such a model is
    logged with that signature and an input example (``text_signature``).
    """

    def load_context(self, context) -> None:
        self.directory = context.artifacts["model"]
        self.model = load_model_dir(self.directory)
        self._loaded = None

    # The pd.DataFrame hint is one MLflow infers no schema from: no input validation or conversion,
    # no signature inference at logging, and no warning about a missing hint. Dicts work too.
    def predict(self, context, model_input: pd.DataFrame, params: dict[str, Any] | None = None):
        if hasattr(model_input, "columns") and "text" in model_input.columns:
            return self._predict_texts(model_input)
        if hasattr(model_input, "columns"):  # pandas DataFrame
            columns = {str(c): model_input[c] for c in model_input.columns}
        elif isinstance(model_input, Mapping):
            columns = dict(model_input)
        else:
            columns = {"input_ids": model_input}
        batch = {name: _as_batch_tensor(name, column) for name, column in columns.items()}
        with torch.inference_mode():
            output = self.model(**batch)
        logits = getattr(output, "logits", output)
        if logits is None:
            logits = output.hidden_states
        return logits.float().cpu().numpy()

    def _predict_texts(self, frame: pd.DataFrame) -> pd.DataFrame:
        from ..inference.loading import load
        from ..inference.predict import predict

        if self._loaded is None:
            self._loaded = load(self.directory)
        pairs = frame["text_pair"].tolist() if "text_pair" in frame.columns else None
        results = predict(self._loaded, [str(t) for t in frame["text"]], pairs)
        return pd.DataFrame([{"label": r.label, "score": r.score, **{f"p_{k}": v for k, v in r.scores.items()}}
                             for r in results])


def text_signature(model_dir) -> tuple[Any, pd.DataFrame] | tuple[None, None]:
    """(signature, input example) of a fine-tuned classifier's folder (``task.json`` with mode
    ``classification`` or ``text_to_text``): texts in, labels and scores out; (None, None) for any
    other model (a pretrained one; a tagger, span, regression or generation model, which
    ``lmforge predict`` refuses, so no example of it could be checked)."""
    import json
    from pathlib import Path

    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    task_file = Path(model_dir) / "task.json"
    if not task_file.is_file():
        return None, None
    task = json.loads(task_file.read_text(encoding="utf-8"))
    if task.get("mode") not in ("classification", "text_to_text"):
        return None, None
    inputs = [ColSpec("string", "text")] + ([ColSpec("string", "text_pair")] if task.get("pair") else [])
    outputs = [ColSpec("string", "label"), ColSpec("double", "score")] + [ColSpec("double", f"p_{k}") for k in task["labels"]]
    example = pd.DataFrame({"text": ["An example text."], **({"text_pair": ["Its pair."]} if task.get("pair") else {})})
    return ModelSignature(inputs=Schema(inputs), outputs=Schema(outputs)), example
