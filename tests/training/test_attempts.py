"""Finished work is never destroyed before its replacement exists: a re-run with changed settings
trains in an attempt folder of its own, a failed one leaves the previous output and checkpoints as
they were, an unreachable tracking server fails at once, and only --restart discards a resume state."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmforge.config import load_params
from lmforge.tracking import TrackingUnavailable
from lmforge.training.pretrain import run_pretrain

from ..mlflow_server import free_port
from ..waiting import wait_for


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones included) with the hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_changed_settings_with_a_dead_tracking_server_fail_fast_and_touch_nothing(project):
    params = load_params(project / "params.yaml")
    run_pretrain(params, "gpt", log=lambda m: None)
    models = project / "models" / "gpt"
    before = snapshot(models)
    assert any(".pretrain.attempts/" in k and k.endswith("checkpoints/last.ckpt") for k in before)
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    changed = load_params(project / "params.yaml", ["train.max_steps=2", f"tracking.uri={uri}", "tracking.timeout_seconds=2"])
    logs: list[str] = []
    with pytest.raises(TrackingUnavailable) as err:
        run_pretrain(changed, "gpt", log=logs.append)
    # fails fast: one check with the configured timeout, before any training starts
    assert uri in str(err.value) and "within 2 s" in str(err.value) and "\n" not in str(err.value)
    assert not any(line.startswith("pretrain gpt: ") and "steps x" in line for line in logs), logs
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


@pytest.mark.slow
def test_a_cancelled_pipes_launch_stops_within_the_wait_and_leaves_a_resumable_checkpoint(project):
    """Cancelling a Dagster run sends SIGINT to the Pipes subprocess (``forward_termination``) and
    waits ``termination_timeout_seconds`` for it: the launched training stops by itself, its
    lock is released, the output is untouched, and the next launch resumes from the checkpoint."""
    from dagster_project.definitions import defs

    client = defs.resources["pipes_subprocess_client"]
    assert client.forward_termination and client.termination_timeout_seconds == 20
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "dagster_project.launch", "pretrain_gpt", "--params", "params.yaml"]
    params_file = project / "params.yaml"
    p = yaml.safe_load(params_file.read_text())
    p["train"].update(max_steps=200, checkpoint_every=5)  # enough steps left that SIGINT lands in training
    p["tracking"]["enabled"] = False
    params_file.write_text(yaml.safe_dump(p))
    attempts = project / "models" / "gpt" / ".pretrain.attempts"
    proc = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: list(attempts.glob("*/checkpoints/last.ckpt")), "the first last.ckpt", timeout=300,
             alive=lambda: proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    # it stops by itself: Lightning's graceful shutdown on an interrupt exits 1 (an interrupt nobody
    # handled would end it with -SIGINT, and the Dagster run's SIGKILL after the wait with -SIGKILL);
    # the deadline only bounds a hang
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-3000:]
    out = project / "models" / "gpt" / "pretrain"
    assert not (out / "metrics.json").exists() and not (out.parent / "pretrain.lock.json").exists()
    again = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr
    assert json.loads((out / "metrics.json").read_text())["steps"] == 200
