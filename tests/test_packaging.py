"""lmforge as a user installs it: the wheel built from the project's files, installed into a
fresh virtual environment (its dependencies are the test environment's, so nothing is
downloaded), then in an empty folder `lmforge init` and `lmforge run` on the embedded default
corpus (a small slice of it), and a pretraining in a terminal that shows its time left early in
the run."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# the run's slice of the default: one architecture on 400 documents of the standard library
SMALL = ["--set", "train.architectures=[gpt]", "--set", "clean.max_documents=400", "--set", "train.max_steps=10",
         "--set", "train.finetune_max_steps=5", "--set", "tokenizer.kinds=[bpe]", "--set", "tokenize.kinds=[bpe]",
         "--set", "dataset.objectives=[clm]", "--set", "tracking.enabled=false", "--set", "train.threads=1",
         "--set", "finetune.scratch_control=false"]


def _tracked_tree(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout.decode()
    for rel in filter(None, files.split("\0")):
        if rel.startswith(("src/", "pyproject.toml", "README.md", "LICENSE")) and (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with lmforge installed from its wheel; returns the venv's bin folder."""
    tmp = tmp_path_factory.mktemp("packaging")
    tree = tmp / "tree"
    _tracked_tree(tree)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(tree),
                    "-w", str(tmp / "wheels")], check=True, capture_output=True)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies: the test environment's packages, as a plain path (its .pth files, among
    # them the checkout's editable lmforge, are not read from there)
    (site / "_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    wheel = next((tmp / "wheels").glob("lmforge-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
                    str(wheel)], check=True, capture_output=True)
    return venv / "bin"


def _env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "MPLBACKEND": "Agg"}


@pytest.mark.slow
def test_init_then_run_in_an_empty_folder_from_the_wheel(installed, tmp_path):
    env = _env(installed)
    where = subprocess.run([str(installed / "python"), "-c", "import lmforge; print(lmforge.__file__)"], env=env,
                           cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert str(installed.parent) in where and str(REPO) not in where  # the wheel's lmforge, not the checkout
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run([str(installed / "lmforge"), "init"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (project / "params.yaml").exists() and (project / "pipelines" / "gpt.yaml").exists()
    done = subprocess.run([str(installed / "lmforge"), "run", *SMALL], cwd=project, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| gpt | clm | bpe |" in done.stdout  # the leaderboard row
    assert (project / "data" / "report" / "leaderboard.md").exists()
    assert (project / "models" / "gpt" / "docstring_kind" / "metrics.json").exists()
    done = subprocess.run([str(installed / "lmforge"), "dvc"], cwd=project, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "dvc.yaml: written" in done.stdout, done.stderr

    # a long pretraining (thousands of steps) in a terminal: the bar gives the time left early on
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(installed / "lmforge"), "pretrain", "gpt", *SMALL, "--set", "train.max_steps=4000"],
                            cwd=project, env={**env, "COLUMNS": "160"}, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, start_new_session=True)
    os.close(slave)
    # tqdm's "n/4000 [elapsed<left, rate]" once the rate is known; the deadline only bounds a hang
    shown = re.compile(r"(\d+)/4000 \[\d+:\d+(?::\d+)?<(\d+:\d+(?::\d+)?), +([\d.]+)(s/ steps| steps/s)[,\]]")
    text, found = "", None
    deadline = time.monotonic() + 300
    try:
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    text += os.read(master, 65536).decode("utf-8", "replace")
                except OSError:
                    break
                found = shown.search(text)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)
    assert found is not None, f"no time left shown:\n{text[-2000:]}"
    done, left, rate, unit = int(found[1]), found[2], float(found[3]), found[4]
    assert done <= 400, found[0]  # shown in the first tenth of the run
    left_s = sum(int(part) * 60 ** i for i, part in enumerate(reversed(left.split(":"))))
    steps_per_s = rate if unit == " steps/s" else 1 / rate
    expected = (4000 - done) / steps_per_s  # the time the steps left take at the rate shown beside it
    assert abs(left_s - expected) <= 1 + 0.01 * expected, (found[0], expected)
