"""pyproject.toml's ranges: every dependency bounded above (the fsspec family included), none
allowing a release without a security fix the project relies on, and the installed versions
inside them."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
# the first release with the fix the project relies on
FLOORS = {
    # basic-auth without a default admin password, admin from MLFLOW_AUTH_ADMIN_* (docker/compose.yaml);
    # also past 3.5.0, whose Host-header check (--allowed-hosts) stops DNS rebinding
    "mlflow": Version("3.16.1"),
}


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return [Requirement(r) for r in listed if Requirement(r).name != "lmforge"]


def test_every_dependency_has_an_upper_bound():
    unbounded = [str(r) for r in requirements()
                 if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)]
    assert unbounded == []
    family = {r.name: r for r in requirements() if r.name in ("fsspec", "s3fs", "gcsfs", "adlfs")}
    assert set(family) == {"fsspec", "s3fs", "gcsfs", "adlfs"}


def test_no_range_allows_a_release_missing_a_security_fix():
    for requirement in requirements():
        floor = FLOORS.get(requirement.name)
        if floor is None:
            continue
        lowest = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        assert lowest and min(lowest) >= floor, f"{requirement} allows releases before {floor}"


def test_the_installed_versions_are_inside_the_ranges():
    outside = []
    for requirement in requirements():
        try:
            installed = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra this environment does not install
        if not requirement.specifier.contains(installed, prereleases=True):
            outside.append(f"{requirement.name} {installed} not in {requirement.specifier}")
    assert outside == []
