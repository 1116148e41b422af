"""Finished work is never destroyed before its replacement exists: a re-run with changed settings
trains in an attempt folder of its own, a failed one leaves the previous output and checkpoints as
they were, an unreachable tracking server fails at once, and only --restart discards a resume state."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest

from lmforge.config import load_params
from lmforge.tracking import TrackingUnavailable
from lmforge.training.pretrain import run_pretrain


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) with the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_changed_settings_with_a_dead_tracking_server_fail_fast_and_touch_nothing(project):
    params = load_params(project / "params.yaml")
    run_pretrain(params, "gpt", log=lambda m: None)
    models = project / "models" / "gpt"
    before = snapshot(models)
    assert any(".pretrain.attempts/" in k and k.endswith("checkpoints/last.ckpt") for k in before)
    uri = f"http://127.0.0.1:{_dead_port()}"
    changed = load_params(project / "params.yaml", ["train.max_steps=2", f"tracking.uri={uri}", "tracking.timeout_seconds=2"])
    started = time.time()
    with pytest.raises(TrackingUnavailable) as err:
        run_pretrain(changed, "gpt", log=lambda m: None)
    assert time.time() - started < 30
    assert uri in str(err.value) and "\n" not in str(err.value)
    assert snapshot(models) == before


def test_a_failed_rerun_leaves_the_output_and_the_earlier_checkpoints(project):
    params = load_params(project / "params.yaml", ["tracking.enabled=false"])
    run_pretrain(params, "gpt", log=lambda m: None)
    models = project / "models" / "gpt"
    before = snapshot(models)

    def broken_tracker(run_name, tags):
        raise RuntimeError("tracking broke mid-way")

    changed = load_params(project / "params.yaml", ["tracking.enabled=false", "train.max_steps=2"])
    with pytest.raises(RuntimeError, match="broke"):
        run_pretrain(changed, "gpt", log=lambda m: None, tracker_factory=broken_tracker)
    after = snapshot(models)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing of before changed or went
    assert not any(k.startswith("pretrain/") for k in set(after) - set(before))  # the output is untouched


def test_a_rerun_replaces_the_output_and_keeps_keep_attempts_attempts(project):
    logs: list[str] = []
    first = run_pretrain(load_params(project / "params.yaml", ["tracking.enabled=false"]), "gpt", log=logs.append)
    attempts = project / "models" / "gpt" / ".pretrain.attempts"
    (one,) = [p.name for p in attempts.iterdir()]
    second = run_pretrain(load_params(project / "params.yaml", ["tracking.enabled=false", "train.max_steps=2"]),
                          "gpt", log=logs.append)
    assert second["steps"] == 2 and first["steps"] == 4
    assert (project / "models" / "gpt" / "pretrain" / "metrics.json").read_text().count('"steps": 2') == 1
    assert sorted(p.name for p in attempts.iterdir()) == sorted([one, second["fingerprint"][:16]])  # both kept
    assert (attempts / one / "checkpoints" / "last.ckpt").exists()
    assert any("new settings" in line and one in line for line in logs)
    third = run_pretrain(load_params(project / "params.yaml", ["tracking.enabled=false", "train.max_steps=3",
                                                               "train.keep_attempts=1"]), "gpt", log=logs.append)
    assert [p.name for p in attempts.iterdir()] == [third["fingerprint"][:16]]  # pruned to the latest


def test_only_restart_discards_the_resume_state(project):
    params = load_params(project / "params.yaml", ["tracking.enabled=false"])
    run_pretrain(params, "gpt", log=lambda m: None)
    out = project / "models" / "gpt" / "pretrain"
    (out / "metrics.json").unlink()  # not finished: the next run resumes from the attempt's last.ckpt
    logs: list[str] = []
    run_pretrain(params, "gpt", log=logs.append)
    assert any("resuming from" in line for line in logs)
    (out / "metrics.json").unlink()
    logs.clear()
    restarted = run_pretrain(load_params(project / "params.yaml", ["tracking.enabled=false", "train.restart=true"]),
                             "gpt", log=logs.append)
    assert any("--restart: discarding the resume state" in line for line in logs)
    assert not any("resuming from" in line for line in logs) and restarted["steps"] == 4
