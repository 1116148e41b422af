"""The images built and tried: ``docker/try_images.sh`` builds the CPU and the CUDA image from
the checkout with podman and runs their commands inside each image's root file system (the
lmforge CLI, a slice of ``lmforge run``, the Dagster and MLflow servers on the loopback, the
entry point, the user).

The full run needs root, podman and mmdebstrap (``apt-get install podman mmdebstrap``) and takes
8 to 16 minutes on two cores (with and without podman's layer cache), so it runs only when asked for with ``-m images`` and the tools
are there: ``make test`` and CI skip it (``.ci/run`` does not install them). A developer runs
``sudo docker/try_images.sh``, or ``sudo .venv/bin/python -m pytest tests/deploy/test_images.py
-m images -n 0``. The script's command-line checks run everywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "try_images.sh"


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--only", "gpu"], "--only takes cpu or cuda, not 'gpu'"),
    (["--only"], "--only needs cpu or cuda"),
    (["--frobnicate"], "unknown argument '--frobnicate'"),
    (["--registry", "--base", "x"], "--registry and --base exclude each other"),
])
def test_bad_arguments_are_one_line_errors(args, message):
    done = _run(*args)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_help_describes_the_script():
    done = _run("--help")
    assert done.returncode == 0 and "podman" in done.stdout and "--only cpu|cuda" in done.stdout


def _missing(config: pytest.Config) -> str | None:
    if "images" not in (config.option.markexpr or ""):
        return "builds both images (8 to 16 minutes): run with -m images"
    if os.geteuid() != 0:
        return "needs root (chroot and mounts)"
    for tool in ("podman", "mmdebstrap", "unshare", "chroot", "curl", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install podman mmdebstrap)"
    return None


@pytest.mark.images
@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_both_images_build_and_every_smoke_step_passes(tmp_path, pytestconfig):
    if (why := _missing(pytestconfig)) is not None:
        pytest.skip(why)
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=5300,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert "try_images: every step passed" in done.stdout, report
    for kind in ("cpu", "cuda"):
        assert f"PASS {kind}: built in" in done.stdout, report
        assert f"PASS {kind}: lmforge run" in done.stdout, report
    assert list(tmp_path.iterdir()) == []  # its scratch folder removed
