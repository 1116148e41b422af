"""The Dagster UI in a real browser: the webserver on 127.0.0.1, driven by headless Chromium
(Debian's /usr/bin/chromium through Playwright; no browser is downloaded).

- On a tiny project, ``dagster dev`` (webserver and daemon, as ``make ui``) serves the asset
  graph; the test opens the corpus group, selects ``clean``, clicks "Materialize selected" and
  waits for the run to succeed, then checks the files and the asset checks, and that the asset
  page shows the stage's chart (the Markdown image of its metadata, decoded by the browser).
- On the repository itself (the default graph), the webserver alone shows the global lineage:
  every group and asset is there; nothing is materialized. Its screenshot of one
  architecture's lineage is the README's (docs/img/asset-graph.png).

Screenshots go to pytest's tmp dir and, when ``LMFORGE_SCREENSHOTS=<dir>`` is set, to that dir.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from lmforge.testing.documents import page as corpus_page, write_jsonl

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# What Chromium needs on a machine without a display or outside network (a fresh profile is
# passed as the persistent context's user data dir).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCATION = "dagster_project.definitions"
VIEWPORT = {"width": 1600, "height": 1000}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                                     "(.ci/run installs it: apt-get install chromium)"),
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")


# ----------------------------------------------------------------------------- the Dagster server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A Dagster webserver (or ``dagster dev``) in its own process group."""

    def __init__(self, command: list[str], project: Path, home: Path, log: Path, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "dagster_project" / "dagster.yaml", home / "dagster.yaml")
        env = {**os.environ, "DAGSTER_HOME": str(home), "LMFORGE_PROJECT": str(project),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(command, cwd=project, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-n:]

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.base + "/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = json.loads(resp.read())
        assert "errors" not in out, out
        return out["data"]

    def wait_ready(self, timeout: float = 150) -> None:
        """Until the webserver answers and the code location has loaded (its error, if any, fails)."""
        query = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
                      locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the Dagster server exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                entries = self.graphql(query)["workspaceOrError"]["locationEntries"]
            except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
                entries = []
            for e in entries:
                if e["name"] == LOCATION and e["loadStatus"] == "LOADED":
                    loaded = e["locationOrLoadError"]
                    if loaded["__typename"] == "PythonError":
                        pytest.fail(f"the code location failed to load: {loaded['message']}")
                    return
            time.sleep(0.5)
        pytest.fail(f"the Dagster server did not come up in {timeout:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM to the whole group (webserver, daemon, code server, run workers), then SIGKILL."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._log.close()


@contextmanager
def dagster(project: Path, home: Path, log: Path, *, daemon: bool) -> Iterator[Server]:
    """``dagster dev`` (webserver and daemon: runs from the UI start; what ``make ui`` runs), or
    the webserver alone (it only shows: the instance's queued runs need the daemon)."""
    bin_dir = Path(sys.executable).parent
    port = free_port()
    if daemon:
        command = [str(bin_dir / "dagster"), "dev", "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)]
    else:
        command = [str(bin_dir / "dagster-webserver"), "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)]
    server = Server(command, project, home, log, port)
    try:
        server.wait_ready()
        server.graphql("mutation { setNuxSeen }")  # no "join the community" dialog over the page
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------- the browser


@contextmanager
def chromium(profile: Path, viewport: dict = VIEWPORT) -> Iterator:
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS, viewport=viewport)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(60_000)
            yield page
        finally:
            context.close()


class Shots:
    """Screenshots in pytest's tmp dir, copied to $LMFORGE_SCREENSHOTS when it is set."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        extra = os.environ.get("LMFORGE_SCREENSHOTS")
        self.extra = Path(extra) if extra else None

    @contextmanager
    def on_failure(self, page, server: Server) -> Iterator[None]:
        """A screenshot of the page and the server's log in the failure report."""
        try:
            yield
        except BaseException:
            try:
                self.take(page, "failure.png")
            finally:
                print(f"--- Dagster log (tail) ---\n{server.tail()}")
            raise

    def take(self, page, name: str) -> Path:
        path = self.folder / name
        page.screenshot(path=str(path))
        if self.extra:
            self.extra.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, self.extra / name)
        return path


def skip_dialog(page) -> None:
    skip = page.get_by_role("button", name="Skip", exact=True)
    if skip.count() and skip.first.is_visible():
        skip.first.click()


# ----------------------------------------------------------------------------- the tiny project


def tiny_project(root: Path) -> Path:
    """A project with 240 synthetic documents and one tokenizer kind, no architecture: the graph
    is clean -> tokenizer_bpe -> tokens_bpe; materializing ``clean`` takes seconds."""
    root.mkdir(parents=True)
    rng = random.Random(7)
    write_jsonl(root / "corpus.jsonl", [{"id": f"d{i}", "text": corpus_page(rng, lines=6)} for i in range(240)])
    params = {
        "clean": {"inputs": ["corpus.jsonl"], "output": "data/clean", "workers": 1},
        "tokenizer": {"kinds": ["bpe"], "output": "data/tokenizers", "bpe": {"vocab_size": 400}},
        "tokenize": {"output": "data/tokens"},
        "dataset": {"objectives": []},
        "train": {"architectures": []},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return root


RUN_QUERY = """query ($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { status stepStats { stepKey status } } ... on PythonError { message } } }"""


def wait_for_run(server: Server, run_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = server.graphql(RUN_QUERY, {"id": run_id})["runOrError"]
        if run.get("status") in ("SUCCESS", "FAILURE", "CANCELED"):
            return run
        time.sleep(1)
    pytest.fail(f"run {run_id} did not finish in {timeout:.0f} s (last: {run}):\n{server.tail()}")


def test_materialize_clean_from_the_ui(tmp_path):
    project = tiny_project(tmp_path / "project")
    shots = Shots(tmp_path / "screenshots")
    with dagster(project, tmp_path / "dagster_home", tmp_path / "dagster.log", daemon=True) as server, \
            chromium(tmp_path / "chromium-profile") as page, shots.on_failure(page, server):
        # The corpus group's asset graph.
        page.goto(f"{server.base}/locations/{LOCATION}/asset-groups/corpus")
        node = page.get_by_text("clean", exact=True).first
        node.wait_for(state="visible")
        skip_dialog(page)
        for name in ("tokenizer_bpe", "tokens_bpe"):  # the downstream assets, linked from the group
            page.get_by_text(name, exact=True).first.wait_for(state="visible")
        page.get_by_text("Never materialized", exact=True).first.wait_for(state="visible")  # live state loaded
        shots.take(page, "01-asset-graph.png")

        # Select clean, click "Materialize selected": the UI launches a run of that asset with its checks.
        node.click()
        button = page.locator("button", has_text="Materialize selected")
        button.wait_for(state="visible")
        with page.expect_response(lambda r: "/graphql" in r.url and r.request.method == "POST"
                                  and "LaunchPipelineExecution" in (r.request.post_data or "")) as launched:
            button.click()
        result = launched.value.json()["data"]["launchPipelineExecution"]
        assert result["__typename"] == "LaunchRunSuccess", result
        run_id = result["run"]["id"]

        # The run page, live, until the run ends.
        page.goto(f"{server.base}/runs/{run_id}")
        run = wait_for_run(server, run_id)
        assert run["status"] == "SUCCESS", f"{run}\n{server.tail()}"
        steps = {s["stepKey"]: s["status"] for s in run["stepStats"]}
        assert steps == {"clean": "SUCCESS", "clean_not_empty": "SUCCESS", "clean_drop_rates": "SUCCESS",
                         "clean_decontaminated": "SUCCESS"}, steps
        page.get_by_text("RUN_SUCCESS", exact=True).first.wait_for(state="visible")
        page.get_by_text("Success", exact=True).first.wait_for(state="visible")
        shots.take(page, "02-run-success.png")

        # The asset page shows the materialization's metadata (counts, drop reasons).
        page.goto(f"{server.base}/assets/clean")
        page.get_by_text("documents_out", exact=True).first.wait_for(state="visible")
        page.get_by_text("drop_reasons", exact=True).first.wait_for(state="visible")
        shots.take(page, "03-asset-clean.png")

        # ... and the stage's pictures: the drops chart, inline in its Markdown (a data: URL), decoded
        row = page.locator("tr", has=page.get_by_text("drops", exact=True))
        row.get_by_text("[Show Markdown]").click()
        chart = page.locator('[role="dialog"] img[src^="data:image/png"]').first
        chart.wait_for(state="visible")
        assert chart.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]") == [True, 1100, 400]
        shots.take(page, "04-asset-clean-chart.png")

    stats = json.loads((project / "data" / "clean" / "stats.json").read_text(encoding="utf-8"))
    assert stats["documents_in"] == 240 and stats["documents_out"] > 100
    assert sorted(p.name for p in (project / "data" / "clean").glob("shard-*.parquet"))
    assert (project / "data" / "clean" / "drops.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (project / "data" / "tokenizers").exists()  # only the selected asset ran


def test_default_asset_graph(tmp_path):
    """The repository's own graph (params.yaml and pipelines/ as shipped) in the global lineage;
    nothing runs (no daemon). The second screenshot, one architecture's lineage through every
    group, is the README's (docs/img/asset-graph.png)."""
    from lmforge.stages import GROUPS, build_stages

    graph = build_stages(root=REPO)
    arch = next(s.key["arch"] for s in graph if s.kind == "pretrain")  # the first enabled architecture
    lineage = ["clean", f"pretrain_{arch}", f"evaluate_{arch}", "report"]
    shots = Shots(tmp_path / "screenshots")
    with dagster(REPO, tmp_path / "dagster_home", tmp_path / "dagster.log", daemon=False) as server, \
            chromium(tmp_path / "chromium-profile", {"width": 1600, "height": 760}) as page, \
            shots.on_failure(page, server):
        nodes = server.graphql("{ assetNodes { assetKey { path } groupName } }")["assetNodes"]
        assert {n["assetKey"]["path"][0] for n in nodes} == {s.name for s in graph}
        assert {n["groupName"] for n in nodes} == {s.group for s in graph}

        page.goto(f"{server.base}/asset-groups")
        for group in sorted({s.group for s in graph}):
            assert group in GROUPS
            page.get_by_text(group, exact=True).first.wait_for(state="visible")
        skip_dialog(page)
        page.get_by_role("button", name="Hide navigation").click()
        page.get_by_role("button", name="panel_show_right").click()  # the group list beside the graph
        page.wait_for_timeout(1000)  # the graph animates to fit
        shots.take(page, "10-global-lineage.png")

        # One architecture's lineage, upstream and downstream, groups expanded.
        page.locator(".CodeMirror").first.click()
        page.keyboard.type(f'+key:"pretrain_{arch}"+')
        page.keyboard.press("Enter")
        page.locator("#zoom-slider-container").get_by_role("button", name="settings").click()
        page.get_by_role("menuitem", name=re.compile("Expand all groups")).click()
        page.keyboard.press("Escape")
        page.get_by_role("menuitem").first.wait_for(state="hidden")
        for name in lineage:
            page.get_by_text(name, exact=True).first.wait_for(state="visible")
        page.wait_for_timeout(1000)
        shots.take(page, "11-default-lineage.png")
