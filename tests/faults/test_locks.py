"""One writer per output: a second writer fails naming the holder (or waits for it), a lock left by
a killed process is taken over, and two `lmforge clean` runs into one folder give one success, one
refusal and the output of a single run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from lmforge.locks import OutputLocked, holder, lock_file, output_lock

from ..waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def hold(output: Path) -> subprocess.Popen:
    """Another process holding the lock on ``output`` until a line comes on its stdin (or its
    stdin closes); returns once it holds it."""
    code = textwrap.dedent(f"""
        import sys
        from lmforge.locks import output_lock
        with output_lock({str(output)!r}, command="the holder"):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen) -> int:
    """Let the holder leave its lock and end; its exit status."""
    proc.stdin.write("\n")
    proc.stdin.close()
    return proc.wait(timeout=120)


def test_a_second_writer_fails_at_once_naming_the_holder(tmp_path):
    out = tmp_path / "data" / "clean"
    proc = hold(out)
    try:
        with pytest.raises(OutputLocked) as err:
            with output_lock(out):
                pass
        assert proc.poll() is None  # at once: refused while the holder still holds it, not after a wait
        message = str(err.value)
        assert "\n" not in message and str(out) in message and f"pid {proc.pid}" in message and "the holder" in message
        assert holder(out)["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_waiting_writer_says_whom_it_waits_for_and_gets_the_lock(tmp_path):
    out = tmp_path / "models" / "gpt" / "pretrain"
    proc = hold(out)
    logs: list[str] = []
    inside: list[object] = []
    released = threading.Event()

    def waiter() -> None:
        with output_lock(out, wait=True, log=logs.append, poll_seconds=0.05):
            inside.append(released.is_set())  # it got in only after the holder was let go
            inside.append(holder(out)["pid"])

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        wait_for(lambda: logs, "the waiter saying whom it waits for", alive=thread.is_alive)
        assert not inside  # it waits while the holder holds the lock
        assert len(logs) == 1 and f"waiting for pid {proc.pid}" in logs[0]
    finally:
        released.set()
        assert release(proc) == 0
        thread.join(120)
    assert not thread.is_alive() and inside == [True, os.getpid()]
    assert holder(out) is None  # released: nobody holds it


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    out = tmp_path / "data" / "tokens"
    proc = hold(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    logs: list[str] = []
    with output_lock(out, log=logs.append):
        assert holder(out)["pid"] == os.getpid()
    assert any(f"took over the lock left by pid {proc.pid}" in line for line in logs), logs


def test_only_rank_zero_takes_the_lock(tmp_path, monkeypatch):
    out = tmp_path / "models" / "bert" / "pretrain"
    proc = hold(out)
    record = lock_file(out).with_name(lock_file(out).name + ".json")
    before = record.read_bytes()
    try:
        monkeypatch.setenv("RANK", "1")
        with output_lock(out):  # another rank of the holder's launch: no lock of its own, no refusal
            assert holder(out)["pid"] == proc.pid and record.read_bytes() == before
        assert proc.poll() is None and record.read_bytes() == before  # the holder's lock and record untouched
        # rank 0 of another launch would have been refused: the lock is still held
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(OutputLocked, match=f"pid {proc.pid}"):
            with output_lock(out):
                pass
    finally:
        proc.kill()
        proc.wait()


def _clean(root: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lmforge.cli", "clean", "--params", str(root / "params.yaml"),
                             "--input", str(root / "corpus.jsonl"), "--output", str(out)],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "stats.json"}


@pytest.mark.slow
def test_two_cleans_into_one_folder_one_succeeds_one_is_refused(tmp_path):
    import yaml

    from lmforge.testing.documents import page, write_jsonl
    import random

    rng = random.Random(3)
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"d{i}", "text": page(rng, lines=6)} for i in range(400)])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"clean": {"workers": 1}}), encoding="utf-8")
    first, second = _clean(tmp_path, tmp_path / "out"), _clean(tmp_path, tmp_path / "out")
    results = [(p.wait(timeout=300), p.communicate()) for p in (first, second)]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results  # the refused stage failed (exit 1), the other finished
    refused = next(err for code, (_, err) in results if code == 1)
    lines = [line for line in refused.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "is being written by pid" in lines[-1], refused
    single = _clean(tmp_path, tmp_path / "single")
    assert single.wait(timeout=300) == 0, single.communicate()
    assert _files(tmp_path / "out") == _files(tmp_path / "single")
