"""A full disk while writing (a file-size limit, RLIMIT_FSIZE, in a child process) leaves no
half-written file in place of a good one: the error is one line and the previous output stays."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from lmforge.testing.documents import page, write_jsonl

LIMIT = "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, ({n}, {n}))"


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def limited(code: str, limit_bytes: int, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LIMIT.format(n=limit_bytes) + "\n" + textwrap.dedent(code)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def test_an_atomic_write_that_fills_the_disk_keeps_the_old_file(tmp_path):
    target = tmp_path / "metrics.json"
    target.write_text('{"good": true}\n')
    done = limited(f"""
        from lmforge.artifacts import atomic_write_json
        atomic_write_json({str(target)!r}, {{"big": "x" * 100000}})
    """, 20000, tmp_path)
    assert done.returncode != 0 and "File too large" in done.stderr
    assert target.read_text() == '{"good": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left


def test_a_staged_folder_that_fills_the_disk_keeps_the_old_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "shard-00000.parquet").write_bytes(b"finished")
    done = limited(f"""
        from lmforge.artifacts import staged_dir
        with staged_dir({str(out)!r}) as tmp:
            (tmp / "small").write_bytes(b"ok")
            (tmp / "big").write_bytes(b"x" * 100000)
    """, 20000, tmp_path)
    assert done.returncode != 0 and "File too large" in done.stderr
    assert snapshot(out) == {"shard-00000.parquet": hashlib.sha256(b"finished").hexdigest()}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.slow
def test_a_clean_that_fills_the_disk_is_one_line_and_leaves_the_finished_output(tmp_path):
    rng = random.Random(5)
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"d{i}", "text": page(rng, lines=6)} for i in range(300)])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"clean": {"workers": 1, "output": "out",
                                                                    "inputs": ["corpus.jsonl"]}}), encoding="utf-8")
    first = subprocess.run([sys.executable, "-m", "lmforge.cli", "clean"], cwd=tmp_path, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    before = snapshot(tmp_path / "out")
    largest = max((tmp_path / "out").rglob("*.parquet"), key=lambda p: p.stat().st_size).stat().st_size
    done = limited("""
        import sys
        from lmforge.cli import main
        sys.argv = ["lmforge", "clean", "--set", "clean.rules.min_sentences=2"]
        main()
    """, max(largest // 4, 4096), tmp_path)
    assert done.returncode == 1, done.stderr  # the stage failed
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "File too large" in lines[-1] and "Traceback" not in done.stderr
    assert snapshot(tmp_path / "out") == before
