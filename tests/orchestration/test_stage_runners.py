"""Every stage kind names its runner, ``run_<kind>`` in the package that does the work, and its
``run`` calls that function: from a kind's module a newcomer reaches the stage's code in one step."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from lmforge.stages import build_stages
from lmforge.stages.kinds import KINDS

from .conftest import REPO, graph_project


class Called(Exception):
    """Raised by the stand-in runner: the kind's ``run`` reached it."""


def resolve(runner: str):
    module, _, name = runner.partition(":")
    return importlib.import_module(module), name


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kind_names_its_runner_run_kind_in_the_code_it_lists(kind):
    spec = KINDS[kind]
    assert spec.runner, f"stages/kinds/{kind}.py: KIND has no runner"
    module, name = resolve(spec.runner)
    assert name == f"run_{kind}"
    assert inspect.isfunction(getattr(module, name))
    source = Path(module.__file__).resolve().relative_to(REPO).as_posix()
    assert any(source == code or source.startswith(code.rstrip("/") + "/") for code in spec.code), \
        f"{source} is not among the {kind} kind's code paths {spec.code}"


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("runners")
    params = graph_project(root, quality={"enabled": True, "reference": ["reference.txt"]},
                           clean={"decontaminate": {"enabled": False}})
    return params, build_stages(params, root=root)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kinds_run_calls_its_named_runner(kind, graph, monkeypatch):
    params, stages = graph
    stage = stages.of_kind(kind)[0]
    module, name = resolve(KINDS[kind].runner)
    seen = []

    def stand_in(*args, **kwargs):
        seen.append((args, kwargs))
        raise Called

    monkeypatch.setattr(module, name, stand_in)
    with pytest.raises(Called):
        KINDS[kind].run(params, stage, lambda line: None)
    assert len(seen) == 1


def test_the_readme_stage_table_names_each_kinds_runner():
    """The README's "Where the code of each stage is": the kind's file, then its runner."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Where the code of each stage is", 1)[1]
    rows = {}
    for line in section.split("\n## ", 1)[0].splitlines():
        for kind in KINDS:
            if f"(src/lmforge/stages/kinds/{kind}.py)" in line:
                rows[kind] = line
    assert set(rows) == set(KINDS)
    for kind, row in rows.items():
        module, name = KINDS[kind].runner.split(":")
        path = module.removeprefix("lmforge.").replace(".", "/") + ".py"
        assert f"`{path}: {name}`" in row, f"README: the {kind} row does not name {path}: {name}"
