"""A fine-tuned model logged to MLflow takes texts: through ``mlflow.pyfunc`` and through
``mlflow models serve`` on 127.0.0.1 it gives the labels ``lmforge predict`` gives."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import torch
from mlflow import MlflowClient

from lmforge.inference.loading import load
from lmforge.inference.predict import predict
from lmforge.tracking import Tracker, default_tracking_uri, ensure_tracking_store

from .test_predict import TEXTS, fine_tuned


@pytest.fixture(scope="module")
def registered(corpus, tmp_path_factory):
    params, _ = corpus
    root = tmp_path_factory.mktemp("serve")
    run = fine_tuned(params, "bert", root, "classification")
    loaded = load(run)
    with torch.no_grad():
        for p in loaded.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    from lmforge.models.folder import save_model_dir

    meta = loaded.meta
    task_file = root / "task.json"
    task_file.write_text(json.dumps(loaded.task))
    save_model_dir(loaded.model, meta["preset"], meta["head"], meta["config_overrides"], run / "model",
                   num_labels=meta["num_labels"], extra_files={"tokenizer": loaded.tokenizer.directory, "task.json": task_file})
    uri = default_tracking_uri(root / "store")
    ensure_tracking_store(uri)
    with Tracker(uri, "serve", "finetune-bert") as tracker:
        version = tracker.log_model(run / "model", name="model", registered_name="lmforge-bert-toy")
    want = [p.label for p in predict(load(run), TEXTS)]
    return uri, MlflowClient(uri).get_model_version_download_uri("lmforge-bert-toy", version.version), want


def test_the_pyfunc_takes_texts_and_has_a_signature(registered):
    uri, model_uri, want = registered
    pyfunc = mlflow.pyfunc.load_model(model_uri)
    out = pyfunc.predict(pd.DataFrame({"text": TEXTS}))
    assert out["label"].tolist() == want
    assert [c.name for c in pyfunc.metadata.get_input_schema().inputs] == ["text"]
    assert {"label", "score", "p_module", "p_class", "p_function"} <= set(out.columns)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_mlflow_models_serve_answers_with_the_same_labels(registered, tmp_path):
    uri, model_uri, want = registered
    port = _free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    # the server runs `uvicorn` from PATH: this environment's
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PATH": f"{mlflow_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    server = subprocess.Popen([str(mlflow_bin), "models", "serve", "-m", model_uri, "--env-manager", "local",
                               "--host", "127.0.0.1", "-p", str(port), "--workers", "1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.log", "w"))
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    pytest.fail("the server did not start: " + (tmp_path / "serve.log").read_text()[-2000:])
                time.sleep(1)
        body = json.dumps({"dataframe_split": {"columns": ["text"], "data": [[t] for t in TEXTS]}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=60).read())
        assert [row["label"] for row in answer["predictions"]] == want
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a server slow to stop on a loaded machine is not what is tested
            server.kill()
            server.wait(timeout=30)
