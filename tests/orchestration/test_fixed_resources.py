"""A launch cannot point a run at another program, params file or cluster: the resources naming
them (the DVC executable, the params path, the Ray address) take no run configuration, so a run
config that sets them, as anyone reaching the UI's launchpad could write, is refused by Dagster
before anything runs. Through Dagster's own API: the job's config check and a real launch."""

from __future__ import annotations

import os
import stat

import pytest
from dagster import AssetKey, DagsterInstance, DagsterInvalidConfigError, validate_run_config

from tests.orchestration.test_dagster import build_definitions, make_project


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("fixed"), orchestrate={"dvc_commit": True})
    evil = root / "evil.sh"  # what an attacker would have the run execute
    evil.write_text(f"#!/bin/sh\ntouch {root / 'PWNED'}\n", encoding="utf-8")
    evil.chmod(evil.stat().st_mode | stat.S_IXUSR)
    other = root / "other-params.yaml"  # another file the attacker wants read
    other.write_text((root / "params.yaml").read_text(encoding="utf-8").replace("data/clean", "/tmp/elsewhere"),
                     encoding="utf-8")
    return root, build_definitions(root)


OVERRIDES = {
    "the DVC executable": ("dvc", lambda root: {"executable": str(root / "evil.sh")}),
    "the params path": ("params", lambda root: {"path": str(root / "other-params.yaml")}),
    "the params root": ("params", lambda root: {"root": "/"}),
    "the Ray address": ("ray", lambda root: {"address": "203.0.113.7:6379"}),
}


@pytest.mark.parametrize("what", sorted(OVERRIDES))
def test_a_launch_overriding_a_fixed_resource_is_refused_before_anything_runs(project, what):
    root, defs = project
    key, config = OVERRIDES[what]
    field = next(iter(config(root)))
    run_config = {"resources": {key: {"config": config(root)}}}
    job = defs.resolve_job_def("full_pipeline")

    with pytest.raises(DagsterInvalidConfigError) as refused:
        validate_run_config(job, run_config)  # what the webserver runs on a launchpad's config
    assert f'unexpected config entry "{field}"' in str(refused.value), str(refused.value)

    instance = DagsterInstance.ephemeral()
    with pytest.raises(DagsterInvalidConfigError):
        job.execute_in_process(run_config=run_config, instance=instance, asset_selection=[AssetKey("clean")])
    assert instance.get_runs() == []  # no run was even created
    assert not (root / "PWNED").exists() and not (root / "data").exists()  # nothing ran


def test_the_fixed_resources_keep_the_projects_values(project):
    root, defs = project
    resources = defs.get_repository_def().get_top_level_resources()
    assert resources["params"].resource_fn(None).file == root / "params.yaml"
    assert resources["dvc"].resource_fn(None).executable == ""  # the dvc beside this Python, else PATH's
    assert resources["ray"].resource_fn(None).address == os.environ.get("LMFORGE_RAY_ADDRESS", "")
    # a launch without resource config (the launchpad's default) is valid
    assert validate_run_config(defs.resolve_job_def("full_pipeline"), {}) is not None
