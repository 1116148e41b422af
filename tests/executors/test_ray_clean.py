"""The data stages on a real Ray cluster (a head and a second node, one CPU each): the same bytes
as the local executor, a worker killed mid-unit, a driver killed and started again, and errors
that name the bad file."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from lmforge.cleaning.stage import run_clean
from lmforge.config import CleanConfig, ExecutorConfig, parse_params
from lmforge.tokenization.tokenizer_stage import run_tokenizer
from lmforge.tokenization.tokens_stage import run_tokens
from lmforge.testing.documents import page, sentence, write_jsonl

pytestmark = pytest.mark.slow

DRIVER = """
import json, sys
from lmforge.cleaning.stage import run_clean
from lmforge.config import CleanConfig, ExecutorConfig
result = run_clean(CleanConfig.model_validate_json(sys.argv[1]), log=lambda m: print(m, flush=True),
                   executor=ExecutorConfig.model_validate_json(sys.argv[2]))
print("EXECUTION " + json.dumps(result.execution), flush=True)
"""


def make_corpus(path: Path, n: int = 3000, seed: int = 0) -> str:
    """Pages that give every step work: repeated URLs (older and newer crawls), a boilerplate line
    on some pages, near-copies of earlier pages, and short or symbol-laden ones the rules drop."""
    rng = random.Random(seed)
    boiler = sentence(rng, 12)
    docs = []
    for i in range(n):
        text = page(rng, lines=10)
        if rng.random() < 0.1:
            text += "\n" + boiler
        if docs and rng.random() < 0.05:  # a near-copy: one word changed on every line (line dedup keeps them)
            lines = []
            for line in rng.choice(docs)["text"].split("\n"):
                words = line.split(" ")
                words[rng.randrange(1, len(words))] = rng.choice(("apple", "river", "stone", "cloud"))
                lines.append(" ".join(words))
            text = "\n".join(lines)
        if rng.random() < 0.03:
            text = "Too short {"
        url = f"http://site{rng.randint(0, 15000)}.example/page"
        docs.append({"id": f"d{i}", "url": url, "timestamp": f"2020-01-{1 + i % 28:02d}T00:00:00Z", "text": text})
    return write_jsonl(path, docs)


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[str, CleanConfig, dict[str, str]]:
    """The corpus, the stage's parameters, and the local executor's output (2 processes)."""
    root = tmp_path_factory.mktemp("ray-corpus")
    inputs = make_corpus(root / "pages.jsonl")
    cfg = CleanConfig(inputs=[inputs], output="clean", shard_size=200, workers=2, dropped_samples=5)
    cwd = Path.cwd()
    os.chdir(root)
    try:
        result = run_clean(cfg, log=lambda m: None)
    finally:
        os.chdir(cwd)
    stats = result.stats
    # every step had something to do, else the comparison proves little
    assert stats["dropped"]["url_duplicate"]["documents"] > 0 and stats["dropped"]["near_duplicate"]["documents"] > 0
    assert stats["lines_removed"] and stats["documents_out"] > 2300
    return inputs, cfg, digest(root / "clean")


def running_units() -> list[tuple[int, str]]:
    """(pid, title) of the Ray worker processes running one of lmforge's units right now."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                title = Path(entry.path, "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::lmforge."):
                found.append((int(entry.name), title))
    return found


def start_driver(run_dir: Path, cfg: CleanConfig, cluster) -> subprocess.Popen:
    run_dir.mkdir(exist_ok=True)
    ex = ExecutorConfig(kind="ray", ray_address=cluster.address)
    return subprocess.Popen([sys.executable, "-c", DRIVER, cfg.model_dump_json(), ex.model_dump_json()], cwd=run_dir,
                            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_same_bytes_as_the_local_executor_on_two_nodes(ray_cluster, corpus, tmp_path):
    _, cfg, local = corpus
    driver = start_driver(tmp_path / "run", cfg, ray_cluster)
    out, _ = driver.communicate(timeout=300)
    assert driver.returncode == 0, out
    ours = digest(tmp_path / "run" / "clean")
    assert ours == local, {name: h for name, h in ours.items() if local.get(name) != h}  # shards, stats.json, samples, charts
    execution = json.loads(out.split("EXECUTION ", 1)[1])
    hosts = {name: ph["hosts"] for name, ph in execution["phases"].items()}
    assert execution["executor"] == "ray" and execution["cluster"]["nodes"] == 2, (execution["cluster"], out)
    assert execution["phases"]["clean: filter shard"]["units"] == 15
    # the units ran on both nodes (over the stage: Ray may place one short phase on one node)
    assert len({h for names in hosts.values() for h in names}) == 2, hosts


def test_a_worker_killed_mid_unit_is_retried_and_the_output_is_unchanged(ray_cluster, corpus, tmp_path):
    _, cfg, local = corpus
    driver = start_driver(tmp_path / "run", cfg, ray_cluster)
    killed = None
    while driver.poll() is None and killed is None:
        running = running_units()
        if running:  # a worker process in the middle of a unit (Ray titles it with the task's name)
            killed = running[0]
            os.kill(killed[0], signal.SIGKILL)
        time.sleep(0.002)
    out, _ = driver.communicate(timeout=300)
    assert killed is not None, "no worker was caught running a unit"
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == psutil.STATUS_ZOMBIE
    assert driver.returncode == 0, out
    assert digest(tmp_path / "run" / "clean") == local


def test_a_killed_driver_started_again_resumes_from_the_finished_units(ray_cluster, corpus, tmp_path):
    _, cfg, local = corpus
    run = tmp_path / "run"
    driver = start_driver(run, cfg, ray_cluster)
    filtered = run / ".clean.work" / "filter"
    while driver.poll() is None and len(list(filtered.glob("*.done"))) < 3:
        time.sleep(0.01)
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=60)
    assert driver.returncode == -signal.SIGKILL, "the driver finished before it could be killed"
    assert not (run / "clean").exists()
    again = start_driver(run, cfg, ray_cluster)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out
    assert "units already done, reused" in out
    assert digest(run / "clean") == local


BAD_INPUT = """
import sys
from lmforge.cleaning.stage import run_clean
from lmforge.config import CleanConfig, ExecutorConfig
from lmforge.corpus.document import CorpusError
for kind, out in (("local", sys.argv[2]), ("ray", sys.argv[3])):
    cfg = CleanConfig(inputs=sys.argv[4:], output=out, workers=2)
    try:
        run_clean(cfg, log=lambda m: None, executor=ExecutorConfig(kind=kind, ray_address=sys.argv[1]))
    except CorpusError as exc:
        print(f"{kind} {exc}")
"""


def test_bad_input_names_the_file_as_locally(ray_cluster, tmp_path):
    """The inputs are read by units on the cluster: a bad file stops the stage with the same
    one-line error, naming the file and line, as locally."""
    good = write_jsonl(tmp_path / "good.jsonl", [{"text": page(random.Random(1))}])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "fine"}) + "\n{not json\n", encoding="utf-8")
    out = run_driver(BAD_INPUT, ray_cluster, ray_cluster.address, str(tmp_path / "local"), str(tmp_path / "ray"),
                     good, str(bad))
    expected = f"{bad}:2: not valid JSON: Expecting property name enclosed in double quotes"
    assert out.splitlines() == [f"local {expected}", f"ray {expected}"]


UNIT_ERROR = """
import sys
from lmforge.config import ExecutorConfig
from lmforge.executors.local import LocalExecutor
from lmforge.executors.ray_tasks import RayExecutor
from lmforge.tokenization.tokens_stage import encode_shard
missing, tmp, address = sys.argv[1:]
for ex in (LocalExecutor(0), RayExecutor(ExecutorConfig(kind="ray", ray_address=address), 0, log=lambda m: None)):
    try:
        ex.map(encode_shard, [(missing, tmp + "/tokenizer.json", "sha", tmp + "/part", "{}", 10)], "encode")
    except Exception as exc:
        print(f"{ex.name} {type(exc).__name__}: {exc}")
    finally:
        ex.close()
"""

TOKENIZE = """
import json, os, sys
from lmforge.config import ExecutorConfig, Params
from lmforge.executors.ray_tasks import RayExecutor
from lmforge.tokenization.tokens_stage import run_tokens
params = Params.model_validate_json(sys.argv[1])
manifest = run_tokens(params, "bpe", log=lambda m: None, executor=ExecutorConfig(kind="ray", ray_address=sys.argv[2]))
print(json.dumps(manifest["execution"]))
ex = RayExecutor(ExecutorConfig(kind="ray", ray_address=sys.argv[2]), 0, log=lambda m: None)
print(json.dumps(ex.map(os.getenv, [("RAYON_NUM_THREADS",)] * 2, "threads")))  # what a unit's Rust pools may use
ex.close()
"""


def run_driver(code: str, cluster, *args: str) -> str:
    """A driver of its own (Ray's connection and token are per process)."""
    done = subprocess.run([sys.executable, "-c", code, *args], env=cluster.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_unit_that_fails_raises_its_own_error_not_retried(ray_cluster, tmp_path):
    missing = str(tmp_path / "gone" / "shard-00000.parquet")
    lines = run_driver(UNIT_ERROR, ray_cluster, missing, str(tmp_path), ray_cluster.address).splitlines()
    assert len(lines) == 2 and lines[0].startswith("local ") and lines[1].startswith("ray ")
    local, on_ray = (line.split(" ", 1)[1] for line in lines)
    assert local == on_ray and missing in local  # the same error, naming the file


def test_token_store_on_the_cluster_is_the_local_one(ray_cluster, corpus, tmp_path):
    inputs, cfg, _ = corpus
    params = parse_params({"clean": {"inputs": [inputs], "output": str(tmp_path / "clean"), "shard_size": 200},
                           "tokenizer": {"kinds": ["bpe"], "output": str(tmp_path / "tok"), "bpe": {"vocab_size": 600}},
                           "tokenize": {"output": str(tmp_path / "local")}})
    run_clean(params.clean, log=lambda m: None)
    run_tokenizer(params, log=lambda m: None)
    run_tokens(params, "bpe", log=lambda m: None)
    on_ray = params.model_copy(update={"tokenize": params.tokenize.model_copy(update={"output": str(tmp_path / "ray")})})
    out = run_driver(TOKENIZE, ray_cluster, on_ray.model_dump_json(), ray_cluster.address).splitlines()
    execution = json.loads(out[0])
    assert execution["executor"] == "ray" and execution["cluster"]["nodes"] == 2  # the test's cluster
    assert json.loads(out[1]) == ["1", "1"]  # the task's one CPU, not a thread per core of the node
    assert digest(tmp_path / "ray" / "bpe") == digest(tmp_path / "local" / "bpe")


def test_the_dagster_clean_asset_runs_on_the_cluster_named_by_its_resource(ray_cluster, tmp_path):
    from dagster import DagsterEventType, DagsterInstance

    from tests.orchestration.test_dagster import make_project
    from tests.training.conftest import REPO

    root = make_project(tmp_path / "project", executor={"kind": "ray"}, clean={"shard_size": 25},
                        orchestrate={"dvc_commit": False})
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**ray_cluster.env, "DAGSTER_HOME": str(home), "LMFORGE_PROJECT": str(root),
           "LMFORGE_RAY_ADDRESS": ray_cluster.address}  # the Ray resource's address (params.yaml names none)
    done = subprocess.run([sys.executable, "-m", "dagster_project.run", "--select", "clean"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        (event,) = instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        meta = {k: v.value for k, v in event.dagster_event.event_specific_data.materialization.metadata.items()}
    # on the test's cluster (a Ray the stage started itself would have one node), every unit on a Ray node
    assert meta["executor"] == "ray" and meta["executor_nodes"] == 2
    filtered = next(line for line in meta["executor_phases"].splitlines() if line.startswith("| clean: filter shard |"))
    assert "| 8 |" in filtered and "node " in filtered
