"""A DVC remote round trip: in a git copy of the project with the tiny configuration of the
orchestration tests, reduced to the data stages (clean, the bpe tokenizer, its token store and the
clm dataset; no architecture, so no training), `dvc repro` runs, `dvc push` copies every output to
a local-directory remote (standing in for an S3/GCS/SSH one), and after the outputs AND the local
cache are deleted `dvc pull` restores every file byte for byte; `dvc status` and
`dvc status --cloud` are clean.

The second half shows the check can fail. An object overwritten on the remote: with DVC's default
`verify = false` the pull succeeds and writes the wrong bytes (`dvc status` does not notice; the
byte comparison does); with `verify = true` the pull fails and the output is not checked out. An
object deleted from the remote: the pull fails and the file is not restored. Put back as pushed,
the same pull restores everything again."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from lmforge.artifacts import sha256_file

from ..orchestration.conftest import tiny_params, write_corpus
from ..orchestration.test_dvc import BIN, DATA, copy_tracked_files


def digests(root: Path, outs: list[str]) -> dict[str, str]:
    """sha256 of every file of the outputs ``outs`` (paths relative to ``root``)."""
    found = {}
    for out in outs:
        base = root / out
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        found.update({p.relative_to(root).as_posix(): sha256_file(p) for p in files})
    return found


def remote_object(remote: Path, path: Path) -> Path:
    """Where a DVC 3 remote keeps the content of the file at ``path`` (addressed by its MD5)."""
    md5 = hashlib.md5(path.read_bytes()).hexdigest()
    return remote / "files" / "md5" / md5[:2] / md5[2:]


@pytest.mark.slow
def test_dvc_push_pull_to_local_remote_restores_deleted_outputs(tmp_path):
    root, remote = tmp_path / "project", tmp_path / "remote"
    root.mkdir()
    copy_tracked_files(root)
    write_corpus(root)
    params = tiny_params(train={"architectures": []}, tracking={"uri": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_SITE_CACHE_DIR": str(tmp_path / "site-cache"),
           "PATH": os.pathsep.join((str(BIN), os.environ.get("PATH", "")))}

    def sh(*cmd: str, ok: bool | None = True) -> subprocess.CompletedProcess:
        """Run ``cmd`` in the project; ok=True: must succeed, False: must fail, None: either."""
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if ok is not None:
            assert (done.returncode == 0) == ok, f"{cmd} exited {done.returncode}:\n{(done.stdout + done.stderr)[-6000:]}"
        return done

    def dvc_json(*args: str) -> dict:
        return json.loads(sh(str(BIN / "dvc"), *args, "--json").stdout)

    def lose_outputs_and_cache() -> None:
        for out in outs:  # a failed pull may have left some out already
            shutil.rmtree(root / out) if (root / out).is_dir() else (root / out).unlink(missing_ok=True)
        shutil.rmtree(root / ".dvc" / "cache")

    sh("git", "init", "-q")
    sh("git", "config", "user.email", "tests@lmforge.invalid")
    sh("git", "config", "user.name", "lmforge tests")
    sh(str(BIN / "lmforge"), "dvc")
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert list(stages) == DATA
    # each data stage's output and its statistics for DVC (cached, pushed and pulled alike)
    outs_of = {name: [*entry["outs"], *entry.get("metrics", [])] for name, entry in stages.items()}
    outs = [o for name in DATA for o in outs_of[name]]
    assert outs == ["data/clean", "data/clean.metrics.json", "data/tokenizers/bpe", "data/tokenizers/bpe.metrics.json",
                    "data/tokens/bpe", "data/tokens/bpe.metrics.json", "data/datasets/clm", "data/datasets/clm.metrics.json"]
    sh("git", "add", "-A")
    sh("git", "commit", "-q", "--no-gpg-sign", "-m", "tiny data project")

    assert re.findall(r"Running stage '(\w+)'", sh(str(BIN / "dvc"), "repro").stdout) == DATA
    sh(str(BIN / "dvc"), "remote", "add", "-d", "local", str(remote))
    sh("git", "add", "dvc.lock", ".dvc/config")
    sh("git", "commit", "-q", "--no-gpg-sign", "-m", "dvc repro; a local remote")
    sh(str(BIN / "dvc"), "push")
    assert dvc_json("status", "--cloud") == {}  # every cached object is on the remote

    before = digests(root, outs)
    assert {"data/tokenizers/bpe/tokenizer.json", "data/clean/stats.json"} <= set(before)
    assert any(f.endswith(".parquet") for f in before) and len(before) >= 10, sorted(before)

    # only the remote holds the outputs now
    lose_outputs_and_cache()
    changed = dvc_json("status")
    assert sorted(changed) == sorted(DATA), changed
    assert all({"changed outs": {out: "not in cache" for out in outs_of[s]}} in changed[s] for s in DATA), changed

    sh(str(BIN / "dvc"), "pull")
    assert digests(root, outs) == before  # the same files, byte for byte
    assert dvc_json("status") == {}
    assert dvc_json("status", "--cloud") == {}

    # the check can fail. 1: an object on the remote overwritten. With the default `verify = false`
    # DVC trusts the remote: `dvc pull` writes the wrong bytes and `dvc status` stays clean; only
    # the byte comparison above tells. With `verify = true` the pull fails and the output stays out.
    tokenizer = "data/tokenizers/bpe/tokenizer.json"
    corrupt = remote_object(remote, root / tokenizer)
    good = corrupt.read_bytes()
    corrupt.chmod(0o644)
    corrupt.write_bytes(b'{"not": "the tokenizer"}\n')
    lose_outputs_and_cache()
    sh(str(BIN / "dvc"), "pull", ok=None)
    after = digests(root, outs)
    assert after != before and after.get(tokenizer) != before[tokenizer]
    assert {f: h for f, h in after.items() if f != tokenizer} == {f: h for f, h in before.items() if f != tokenizer}

    sh(str(BIN / "dvc"), "remote", "modify", "local", "verify", "true")
    lose_outputs_and_cache()
    failed = sh(str(BIN / "dvc"), "pull", ok=False)
    assert "data/tokenizers/bpe" in failed.stderr, failed.stderr
    assert not (root / tokenizer).exists() and digests(root, outs) != before
    assert "data/tokenizers/bpe" in json.dumps(dvc_json("status"))

    # 2: an object deleted from the remote (the tokenizer's put back): the pull fails, the file is not restored
    corrupt.write_bytes(good)
    shard = sorted(f for f in before if f.endswith(".parquet"))[0]
    gone = remote_object(remote, root / shard)
    good_shard = gone.read_bytes()
    gone.unlink()
    lose_outputs_and_cache()
    failed = sh(str(BIN / "dvc"), "pull", ok=False)
    assert gone.name in failed.stderr and "failed" in failed.stderr, failed.stderr
    assert not (root / shard).exists() and digests(root, outs) != before

    # with both objects as pushed, the same pull (verify on) restores every file again
    gone.write_bytes(good_shard)
    lose_outputs_and_cache()
    sh(str(BIN / "dvc"), "pull")
    assert digests(root, outs) == before
    assert dvc_json("status") == {}
