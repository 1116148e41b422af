"""What a training run cost: tokens, model FLOPs, wall and processor seconds, and the model FLOPs
utilisation (MFU) where the device's peak is known.

FLOPs are the model's (``models.flops``: 6 N plus attention, the head at the predicted
positions), so they say what the training did, not what the hardware executed (recomputation,
padding of shapes and the optimizer are not counted).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ..models.flops import flops_per_token

# the dense bf16 tensor-core peak of each GPU (SXM parts), TFLOP/s; a CPU's is not known here
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0}


def device_peak(device: str) -> float | None:
    """FLOP/s of one ``device`` (its name, e.g. torch.cuda.get_device_name()), None if unknown."""
    return next((v * 1e12 for k, v in PEAK_TFLOPS.items() if k in device), None)


def device_name(device: torch.device) -> str:
    """The name a run reports for the device it trained on: the GPU's model, or ``cpu``."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def labelled_fraction(batches: Iterable[dict]) -> float:
    """Predicted positions per input position over ``batches`` (``labels`` other than -100,
    against ``input_ids``' positions; 1.0 for a batch without labels)."""
    labelled = positions = 0
    for batch in batches:
        ids = batch["input_ids"]
        labels = batch.get("labels")
        n = ids.numel()
        positions += n
        labelled += n if labels is None or labels.dim() < 2 else int((labels != -100).sum())
    return labelled / positions if positions else 1.0


def compute_record(model: nn.Module, *, tokens: int, examples: int, seconds: float, cpu_seconds: float,
                   predicted_fraction: float, device: str, devices: int = 1) -> dict:
    """The run's compute: ``tokens`` input positions (padding included) over ``examples``
    examples in ``seconds`` of wall time on ``devices`` of ``device``."""
    positions = tokens / examples if examples else 0.0
    per_token = flops_per_token(model, positions, predicted_fraction)
    flops = per_token * tokens
    peak = device_peak(device)
    return {
        "tokens": int(tokens), "examples": int(examples), "positions_per_example": round(positions, 2),
        "predicted_fraction": round(predicted_fraction, 4), "flops_per_token": round(per_token),
        "flops": flops, "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "device": device,
        "devices": devices, "mfu": round(flops / seconds / (peak * devices), 4) if peak and seconds > 0 else None,
    }
