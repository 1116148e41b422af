"""A password in the tracking URI stays in the process that connects: a pretraining run logging
to ``http://user:PASSWORD@host`` whose server goes away mid-run (so the spool is used) writes the
password into no file (outputs, lock records, spool, the MLflow store and artifacts, the server's
log) and no line it prints; ``lmforge tracking sync`` sends the spool to the configured server
only, uploading only the spool's own copies."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from lmforge.tracking.spool import Spool, pending

from ..mlflow_server import MlflowServer

SECRET = "pw-" + secrets.token_hex(12)


def files_holding(root: Path, needle: str) -> list[str]:
    """Every regular file under ``root`` (links not followed) whose bytes hold ``needle``."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
                found.append(str(path))
    return found


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lmforge.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_a_password_in_the_tracking_uri_is_in_no_file_the_run_writes(project, tmp_path):
    from mlflow import MlflowClient

    server = MlflowServer(tmp_path / "server")
    server.folder.mkdir()
    server.start()
    try:
        shown = f"http://127.0.0.1:{server.port}"
        uri = f"http://lmforge:{SECRET}@127.0.0.1:{server.port}"
        overrides = ["--set", f"tracking.uri={uri}", "--set", "tracking.retry_seconds=1",
                     "--set", "tracking.timeout_seconds=2"]
        run = subprocess.Popen([sys.executable, "-m", "lmforge.cli", "pretrain", "gpt", "--set", "train.max_steps=30",
                                *overrides], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines, lock_records = [], []
        for line in run.stdout:
            lines.append(line)
            if "steps x" in line and server.proc is not None:  # training has started: the stage holds its lock
                lock_records = [p.read_text(encoding="utf-8") for p in project.rglob("*.lock.json")]
                server.stop()  # the server goes away: the rest of the run is spooled
        assert run.wait(timeout=600) == 0, "".join(lines)
        output = "".join(lines)
        assert "does not answer" in output and "lmforge tracking sync" in output, output
        assert lock_records and all(shown in r and SECRET not in r for r in lock_records), lock_records
        (spool,) = pending(project / "data" / "tracking-spool")
        assert {r["uri"] for r in spool.records()} == {shown}

        assert [line for line in lines if SECRET in line] == []
        assert files_holding(project, SECRET) == []  # outputs, spool, locks, the project's own files
        assert files_holding(server.folder, SECRET) == []  # MLflow's store, artifacts and the server's log

        # sync to a server the configuration does not name: nothing sent, the spool left alone
        elsewhere = cli("tracking", "sync", "--set", "tracking.uri=http://127.0.0.1:9", cwd=project)
        assert elsewhere.returncode == 1 and f"kept for {shown}, not for the configured" in elsewhere.stderr
        assert len(list(pending(project / "data" / "tracking-spool"))) == 1

        server.start()
        synced = cli("tracking", "sync", *overrides, cwd=project)
        assert synced.returncode == 0, synced.stderr
        assert "1 runs sent, 0 still waiting" in synced.stdout and SECRET not in synced.stdout + synced.stderr
        assert not list(pending(project / "data" / "tracking-spool"))
        assert files_holding(project, SECRET) == [] and files_holding(server.folder, SECRET) == []

        client = MlflowClient(server.url)
        (found,) = client.search_runs([client.get_experiment_by_name("lmforge").experiment_id])
        assert found.info.status == "FINISHED"
        config = json.loads(Path(client.download_artifacts(found.info.run_id, "resolved_config.json", str(tmp_path)))
                            .read_text(encoding="utf-8"))
        assert config["params"]["tracking"]["uri"] == shown  # what was logged: the URI without its password
    finally:
        server.stop()


def test_sync_refuses_a_spool_that_would_upload_a_file_outside_it(tmp_path):
    """An edited spool line naming another file (a key, a password file) is refused, with one
    line, before anything is sent; the spool stays as it was."""
    (tmp_path / "params.yaml").write_text("tracking: {}\n", encoding="utf-8")
    spool_dir = tmp_path / "spool"
    private = tmp_path / "id_rsa"
    private.write_text("PRIVATE KEY\n", encoding="utf-8")
    spool = Spool(spool_dir, "http://127.0.0.1:9", "run1")
    spool.add({"op": "batch", "metrics": [["loss", 1.0, 0, 1]]})
    spool.add({"op": "artifact", "path": str(private), "artifact_path": None})
    before = spool.file.read_bytes()
    done = cli("tracking", "sync", "--set", "tracking.uri=http://127.0.0.1:9", "--set", f"tracking.spool_dir={spool_dir}",
               cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"error: {spool.file}:2: names {private}, which is not a copy the run kept in "
                                   f"{spool_dir / 'run1'}; the spool is not sent")
    assert spool.file.read_bytes() == before

    # a link inside the run's own folder leading out of it is refused the same way
    spool.file.write_bytes(before.splitlines(keepends=True)[0])
    kept = Path(spool.keep(tmp_path / "id_rsa"))
    kept.unlink()
    kept.symlink_to(private)
    spool.add({"op": "artifact", "path": str(kept), "artifact_path": None})
    done = cli("tracking", "sync", "--set", "tracking.uri=http://127.0.0.1:9", "--set", f"tracking.spool_dir={spool_dir}",
               cwd=tmp_path)
    assert done.returncode == 2 and f"names {kept}, which is not a copy" in done.stderr, done.stderr


def test_sync_asks_only_the_configured_server(tmp_path, monkeypatch):
    """Spools of other servers are left waiting and their servers are not even asked."""
    from lmforge.tracking import sync

    asked: list[str] = []
    monkeypatch.setattr(sync, "check_reachable", lambda uri, timeout: asked.append(uri))
    sent_to: list[str] = []
    monkeypatch.setattr(Spool, "send", lambda self, apply: sent_to.append(self.run_id) or 1)
    for run, uri in (("mine", "http://u:old-password@127.0.0.1:5000"), ("theirs", "http://203.0.113.9:5000")):
        Spool(tmp_path, uri, run).add({"op": "batch", "metrics": [["loss", 1.0, 0, 1]]})
    logs: list[str] = []
    configured = f"http://lmforge:{SECRET}@127.0.0.1:5000"
    assert sync.send_spooled(tmp_path, configured, log=logs.append) == (1, 1)
    assert asked == [configured] and sent_to == ["mine"]
    assert any("kept for http://203.0.113.9:5000, not for the configured tracking server http://127.0.0.1:5000" in line
               for line in logs), logs
    assert not any(SECRET in line or "old-password" in line for line in logs)
    assert "old-password" not in (tmp_path / "mine.jsonl").read_text(encoding="utf-8")  # a spool line keeps no password
