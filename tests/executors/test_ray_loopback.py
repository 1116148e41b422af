"""The Ray instance a data stage starts for itself (``executor.kind: ray`` without an address)
serves this machine only: while a clean runs on it, every socket its processes listen on (GCS,
raylet, agents, workers, the driver) is bound to the loopback address, as a neighbour on the
network scanning the machine would find."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from lmforge.config import CleanConfig, ExecutorConfig

from .test_ray_clean import make_corpus

pytestmark = pytest.mark.slow

DRIVER = """
import json, os, sys
from lmforge.cleaning.stage import run_clean
from lmforge.config import CleanConfig, ExecutorConfig
result = run_clean(CleanConfig.model_validate_json(sys.argv[1]), log=lambda m: print(m, flush=True),
                   executor=ExecutorConfig.model_validate_json(sys.argv[2]))
from ray._private import ray_constants
print("EXECUTION " + json.dumps(result.execution), flush=True)
print("AFTER " + json.dumps([ray_constants.ENABLE_RAY_CLUSTER, os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")]))
"""


def loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or address).is_loopback


def listeners(root: int) -> set[tuple[str, int, str]]:
    """(address, port, process name) of the listening TCP sockets of ``root`` and its descendants."""
    try:
        tree = psutil.Process(root)
        pids = {root} | {p.pid for p in tree.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()
    found = set()
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            try:
                name = psutil.Process(c.pid).name()
            except psutil.NoSuchProcess:
                name = "?"
            found.add((c.laddr.ip, c.laddr.port, name))
    return found


def test_a_clean_on_a_local_ray_listens_on_loopback_only(tmp_path):
    inputs = make_corpus(tmp_path / "pages.jsonl", n=1500)
    cfg = CleanConfig(inputs=[inputs], output="clean", shard_size=200, workers=1)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, cfg.model_dump_json(), ExecutorConfig(kind="ray").model_dump_json()],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[tuple[str, int, str]] = set()
    deadline = time.monotonic() + 300
    while driver.poll() is None and time.monotonic() < deadline:
        seen |= listeners(driver.pid)  # while the stage runs: Ray's servers and its workers
        time.sleep(0.05)
    out, _ = driver.communicate(timeout=60)
    assert driver.returncode == 0, out
    names = {name for _, _, name in seen}
    assert {"gcs_server", "raylet"} <= names, seen  # the local instance was watched while it ran
    assert [s for s in seen if not loopback(s[0])] == [], seen
    execution = json.loads(out.split("EXECUTION ", 1)[1].splitlines()[0])
    assert execution["executor"] == "ray" and execution["cluster"]["nodes"] == 1
    # the driver's process is left as it was: a later connection to a cluster is Ray's usual one
    assert json.loads(out.split("AFTER ", 1)[1].splitlines()[0]) == [True, None]
    assert (tmp_path / "clean" / "stats.json").is_file()
