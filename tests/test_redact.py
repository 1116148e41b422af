"""A URI's user and password are removed from what lmforge shows or keeps (``lmforge.redact``):
in text, in nested data, in every log record once a tracker holds credentials, in lock records
and in the command line's messages."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys

import pytest

from lmforge.redact import has_credentials, redact, redact_data, redact_log_records, redact_uri

SECRET = "hunter2-xyz"


@pytest.mark.parametrize("text,expected", [
    (f"http://user:{SECRET}@127.0.0.1:5000", "http://127.0.0.1:5000"),
    (f"https://{SECRET}@github.com/org/repo.git", "https://github.com/org/repo.git"),  # a token as the user
    (f"postgresql+psycopg2://lmforge:{SECRET}@postgres:5432/mlflow", "postgresql+psycopg2://postgres:5432/mlflow"),
    (f"http://u:p@ss{SECRET}@host/x?mail=a@b#c@d", "http://host/x?mail=a@b#c@d"),  # a raw "@" in the password
    (f"pretrain --set tracking.uri=http://u:{SECRET}@h:1 --set x=1", "pretrain --set tracking.uri=http://h:1 --set x=1"),
    (f"API request to http://u:{SECRET}@h:1/api failed; retry http://v:{SECRET}@g/",
     "API request to http://h:1/api failed; retry http://g/"),
    ("sqlite:////data/a@b/mlflow.db", "sqlite:////data/a@b/mlflow.db"),  # no host part: nothing to remove
    ("http://host/path@x", "http://host/path@x"),
    ("write to ops@example.com", "write to ops@example.com"),
])
def test_redact(text, expected):
    assert redact(text) == expected
    assert SECRET not in redact(text)


def test_redact_uri_and_data():
    assert redact_uri(None) is None
    assert has_credentials(f"http://u:{SECRET}@h") and not has_credentials("http://h:5000")
    data = {"tracking": {"uri": f"http://u:{SECRET}@h:1"}, "inputs": [f"s3://k:{SECRET}@bucket/x", 3], "n": None}
    assert redact_data(data) == {"tracking": {"uri": "http://h:1"}, "inputs": ["s3://bucket/x", 3], "n": None}


def test_log_records_of_any_logger_are_redacted(caplog):
    redact_log_records()
    redact_log_records()  # once is enough; twice changes nothing
    logger = logging.getLogger("some.library")
    with caplog.at_level(logging.WARNING):
        logger.warning("request to %s failed", f"http://u:{SECRET}@h:1/api")
        try:
            raise ConnectionError(f"cannot reach http://u:{SECRET}@h:1")
        except ConnectionError:
            logger.exception("gave up")
        logger.warning("nothing to hide at %s", "http://h:1")
    text = "\n".join(logging.Formatter().format(r) for r in caplog.records)
    assert SECRET not in text
    assert "request to http://h:1/api failed" in text and "cannot reach http://h:1" in text
    assert caplog.records[-1].getMessage() == "nothing to hide at http://h:1"


def test_a_lock_record_keeps_no_password(tmp_path, monkeypatch):
    from lmforge.locks import holder, output_lock

    monkeypatch.setattr(sys, "argv", ["lmforge", "pretrain", "--set", f"tracking.uri=http://u:{SECRET}@h:1"])
    with output_lock(tmp_path / "out"):
        record = holder(tmp_path / "out")
    assert record["command"] == "lmforge pretrain --set tracking.uri=http://h:1"


def test_the_command_lines_messages_show_no_password(tmp_path):
    """``tracking sync`` towards a server that does not answer: the line naming it has no password."""
    from lmforge.tracking.spool import Spool

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once released
    (tmp_path / "params.yaml").write_text("tracking: {}\n", encoding="utf-8")
    Spool(tmp_path / "spool", f"http://127.0.0.1:{port}", "run1").add({"op": "batch", "metrics": [["loss", 1.0, 0, 1]]})
    done = subprocess.run([sys.executable, "-m", "lmforge.cli", "tracking", "sync", "--set", f"tracking.spool_dir={tmp_path / 'spool'}",
                           "--set", f"tracking.uri=http://u:{SECRET}@127.0.0.1:{port}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"tracking server http://127.0.0.1:{port} does not answer" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert json.loads((tmp_path / "spool" / "run1.jsonl").read_text(encoding="utf-8"))["uri"] == f"http://127.0.0.1:{port}"
