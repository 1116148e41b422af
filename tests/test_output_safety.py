"""What a careless user (or a hostile model folder) can do to the commands that write: every
output that is or holds one of its inputs, the project folder, the home folder or / is refused
with one line and exit 2 before anything is moved or deleted (the input tree hashed before and
after); a folder the stage did not make is replaced only with --force; a model folder whose
record claims enormous sizes, and configuration values that cannot work, are one line."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lmforge.artifacts import UnsafeOutput, check_output
from lmforge.cli import main
from lmforge.config import ConfigError, load_params
from lmforge.testing.documents import page, write_jsonl

REPO = Path(__file__).resolve().parents[1]


def tree(path: Path) -> dict[str, str]:
    """Every file and folder under ``path`` (itself included when a file): relative name -> sha256."""
    path = Path(path)
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        out[rel] = "dir" if p.is_dir() and not p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def refused(args: list, *, what: str = "refused") -> str:
    """Run the command; it must be refused: exit 2, one line on stderr naming the refusal."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 2, (args, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and what in lines[0], (args, result.stderr)
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A project folder (the working folder) with raw input files in raw/ and beside it, a home
    folder of its own (HOME) and no params.yaml: every parameter at its default."""
    root = tmp_path / "project"
    (root / "raw").mkdir(parents=True)
    rng = random.Random(0)
    for name in ("raw/a.jsonl", "raw/b.jsonl", "c.jsonl"):
        write_jsonl(root / name, [{"id": f"{name}-{i}", "text": page(rng)} for i in range(4)])
    home = tmp_path / "home"
    (home / "notes.txt").parent.mkdir()
    (home / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(root)
    return root


CLEAN = ["clean", "--workers", "1", "--set", "clean.near_dedup.enabled=false"]


@pytest.mark.parametrize("inputs, output, message", [
    (["."], ".", "it is the project folder"),              # output = input = the project
    (["raw"], "raw", "it is the input raw"),               # output = input folder (the first case)
    (["raw/a.jsonl"], "raw", "it holds the input raw/a.jsonl"),
    (["raw"], "raw/..", "it is the project folder"),       # the project, spelt another way
    (["raw/a.jsonl"], "raw/../raw", "it holds the input raw/a.jsonl"),  # the same folder, spelt another way
    (["raw"], "/", "it is the file system root"),
    (["raw"], "~", "it is the home folder"),
])
def test_clean_refuses_an_output_over_its_inputs_and_the_project(project, inputs, output, message):
    before, home = tree(project), tree(Path(os.environ["HOME"]))
    args = [*CLEAN, *[a for i in inputs for a in ("-i", i)], "-o", os.path.expanduser(output)]
    refused(args, what=message)
    assert tree(project) == before and tree(Path(os.environ["HOME"])) == home


def test_clean_refuses_an_output_that_holds_its_input_folder(tmp_path, monkeypatch):
    """`lmforge clean -i DIR/raw -o DIR` (the issue's second case), DIR outside the project, and
    the same through a link to DIR."""
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    write_jsonl(data / "raw" / "a.jsonl", [{"id": f"d{i}", "text": page(random.Random(i))} for i in range(3)])
    (tmp_path / "link").symlink_to(data)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    before = tree(data)
    refused([*CLEAN, "-i", data / "raw", "-o", data], what=f"it holds the input {data / 'raw'}")
    refused([*CLEAN, "-i", data / "raw", "-o", tmp_path / "link"], what="it holds the input")
    refused([*CLEAN, "-i", tmp_path / "link" / "raw", "-o", data / "raw"], what="it is the input")
    assert tree(data) == before


def test_a_folder_the_stage_did_not_make_needs_force_and_its_own_output_is_replaced(project):
    foreign = project / "out"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work\n")
    before = tree(foreign)
    line = refused([*CLEAN, "-i", "raw", "-o", "out"], what="holds no stats.json of a finished run")
    assert "--force" in line and tree(foreign) == before
    (project / "file").write_text("a file\n")
    refused([*CLEAN, "-i", "raw", "-o", "file"], what="it is a file")
    assert (project / "file").read_text() == "a file\n"

    forced = CliRunner().invoke(main, [*CLEAN, "-i", "raw", "-o", "out", "--force"])
    assert forced.exit_code == 0, forced.output
    assert not (foreign / "thesis.tex").exists() and (foreign / "stats.json").exists()
    # the stage's own output: rerun (up to date) and rerun with other settings replace it freely
    again = CliRunner().invoke(main, [*CLEAN, "-i", "raw", "-o", "out"])
    assert again.exit_code == 0 and "up to date" in again.output
    other = CliRunner().invoke(main, [*CLEAN, "-i", "raw", "-o", "out", "--set", "clean.rules.min_sentences=1"])
    assert other.exit_code == 0, other.output
    assert json.loads((foreign / "stats.json").read_text())["params"]["rules"]["min_sentences"] == 1
    # --force never reaches the inputs
    refused([*CLEAN, "-i", "raw", "-o", "raw", "--force"], what="it is the input raw")


def test_run_refuses_before_any_stage_runs(project):
    (project / "params.yaml").write_text("clean: {inputs: [raw], output: raw, workers: 1}\ntrain: {architectures: []}\n")
    before = tree(project)
    refused(["run"], what="clean output raw: refused: it is the input raw")
    assert tree(project) == before


def _params(project: Path, text: str) -> None:
    (project / "params.yaml").write_text(text, encoding="utf-8")


def _foreign(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("not the stage's\n")
    return tree(folder)


@pytest.mark.parametrize("command, params, output", [
    (["tokenizer", "--kind", "bpe"], "", "data/tokenizers/bpe"),
    (["tokenize", "--kind", "bpe"], "", "data/tokens/bpe"),
    (["dataset", "clm"], "", "data/datasets/clm"),
    (["pretrain", "gpt"], "train: {architectures: [gpt]}\n", "models/gpt/pretrain"),
    (["finetune", "gpt", "--task", "docstring_kind"], "train: {architectures: [gpt]}\n", "models/gpt/docstring_kind"),
])
def test_every_stage_refuses_a_folder_it_did_not_make(project, command, params, output):
    _params(project, params)
    before = _foreign(project / output)
    refused(command, what=f"output {output}: refused: the folder is not empty")
    assert tree(project / output) == before


@pytest.mark.parametrize("command, params, message", [
    # the tokenizer's output holds the corpus it reads
    (["tokenizer", "--kind", "bpe"], "tokenizer: {input: data/tokenizers/bpe/corpus}\n",
     "it holds the input data/tokenizers/bpe/corpus"),
    # the token store holds the corpus it encodes
    (["tokenize", "--kind", "bpe"], "tokenizer: {input: data/tokens/bpe/corpus}\n",
     "it holds the input data/tokens/bpe/corpus"),
    # a fine-tuning's output is its task folder
    (["finetune", "gpt", "--task", "models/gpt/task"], "train: {architectures: [gpt]}\n", "it is the input models/gpt/task"),
    # evaluate and report write into the project folder itself, or into /
    (["evaluate", "gpt"], "train: {architectures: [gpt]}\nevaluate: {output: .}\n", "it is the project folder"),
    (["report"], "train: {architectures: [gpt]}\nevaluate: {output: /}\n", "it is the file system root"),
    (["report"], "train: {architectures: [gpt]}\nevaluate: {output: ..}\n", "it holds the project folder"),
])
def test_every_stage_refuses_an_output_over_its_inputs(project, command, params, message):
    (project / "models" / "gpt" / "task").mkdir(parents=True)
    (project / "models" / "gpt" / "task" / "train.csv").write_text("text,label\na,b\n")
    for corpus in ("data/tokenizers/bpe/corpus", "data/tokens/bpe/corpus"):
        (project / corpus).mkdir(parents=True)
        (project / corpus / "stats.json").write_text("{}\n")
    _params(project, params)
    before = tree(project)
    refused(command, what=message)
    assert tree(project) == before


@pytest.fixture()
def model_folder(project):
    """What a model folder looks like to the commands that find one (its weights are not read
    before the output is checked)."""
    folder = project / "models" / "gpt" / "task" / "model"
    folder.mkdir(parents=True)
    (folder / "lmforge_model.json").write_text(json.dumps({"preset": "gpt-tiny", "head": "classification",
                                                           "num_labels": 2, "config_overrides": {}}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (project / "texts.csv").write_text("text\nReturn the parsed value.\n")
    return folder


@pytest.mark.parametrize("args, message", [
    (["predict", "{model}", "--file", "texts.csv", "-o", "texts.csv"], "it is the input texts.csv"),
    (["predict", "{model}", "--file", "texts.csv", "-o", "./texts.csv"], "it is the input texts.csv"),
    (["embed", "{model}", "--file", "texts.csv", "-o", "texts.csv"], "it is the input texts.csv"),
    (["export", "{model}", "{model}"], "it is the input"),
    (["export", "{model}", "models"], "it holds the input"),
    (["export", "{model}", "."], "it is the project folder"),
    (["export", "{model}", "~"], "it is the home folder"),
    (["init", "~"], "it is the home folder"),
    (["init", "/"], "it is the file system root"),
])
def test_the_commands_that_use_models_and_init_refuse_their_inputs(project, model_folder, args, message):
    before, home = tree(project), tree(Path(os.environ["HOME"]))
    refused([os.path.expanduser(a.format(model=model_folder)) for a in args], what=message)
    assert tree(project) == before and tree(Path(os.environ["HOME"])) == home


def test_predictions_are_written_whole(tmp_path):
    from lmforge.inference.texts import write_predictions

    out = tmp_path / "p.csv"
    out.write_text("old\n")
    write_predictions([{"text": "a", "label": "x", "score": 0.5}], str(out))
    assert out.read_text() == "text,label,score\na,x,0.5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["p.csv"]  # no temporary left beside it


def test_check_output_lets_the_stage_replace_its_own_output(tmp_path):
    out = tmp_path / "out"
    assert check_output(out, inputs=[tmp_path / "in"], record="stats.json", root=tmp_path / "project") == out
    out.mkdir()
    check_output(out, record="stats.json", root=None)  # empty: fine
    (out / "x").write_text("x")
    with pytest.raises(UnsafeOutput, match="pass --force"):
        check_output(out, record="stats.json", root=None)
    (out / "stats.json").write_text('{"fingerprint": "f"}')
    check_output(out, record="stats.json", root=None)
    check_output(out, inputs=["stdlib", "hf:c4", "s3://bucket/out", "-"], root=None)  # not paths
    with pytest.raises(UnsafeOutput, match="it holds the input"):
        check_output(tmp_path, inputs=[out / "x"], root=None)


# ----------------------------------------------------------------------------- untrusted model folders and configs


@pytest.fixture()
def tiny_model(tmp_path):
    from lmforge.models.folder import save_model_dir
    from lmforge.models.registry import build_model

    model = build_model("gpt-tiny", vocab_size=300, n_positions=32, n_layers=1)
    return save_model_dir(model, "gpt-tiny", "lm", {"vocab_size": 300, "n_positions": 32, "n_layers": 1},
                          tmp_path / "model")


def _claim(folder: Path, **overrides) -> None:
    meta = json.loads((folder / "lmforge_model.json").read_text())
    meta["config_overrides"].update(overrides)
    (folder / "lmforge_model.json").write_text(json.dumps(meta))


LIMITED = """
import resource, sys
limit = 2 << 30  # 2 GiB of address space: the claimed model is thousands of times larger
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from lmforge.cli import main
sys.argv = ["lmforge", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("claim, message", [
    ({"vocab_size": 5_000_000_000}, "gpt.wte.weight (300, 128) where the record gives (5000000000, 128)"),
    ({"d_model": 1_000_000, "n_heads": 4}, "where the record gives"),
    ({"n_layers": 100_000_000}, "modules; its sizes are not those of a model"),
    ({"d_model": "wide"}, "cannot be built (TypeError"),
])
def test_a_model_folder_claiming_enormous_sizes_fails_without_allocating(tiny_model, tmp_path, claim, message):
    _claim(tiny_model, **claim)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", LIMITED, "generate", str(tiny_model), "Hello"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "MemoryError" not in done.stderr and "Traceback" not in done.stderr


def test_a_model_folder_whose_files_are_not_what_they_claim_is_one_error(tiny_model):
    from lmforge.models.folder import check_model_dir, load_model_dir

    assert load_model_dir(tiny_model) is not None  # as written: fine
    (tiny_model / "lmforge_model.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        check_model_dir(tiny_model)
    (tiny_model / "lmforge_model.json").write_text(json.dumps({"preset": ["gpt-tiny"], "config_overrides": {}}))
    with pytest.raises(ConfigError, match="preset is"):
        check_model_dir(tiny_model)
    (tiny_model / "lmforge_model.json").write_text(json.dumps({"preset": "gpt-tiny", "head": "lm", "config_overrides": {
        "vocab_size": 300, "n_positions": 32, "n_layers": 1}}))
    data = (tiny_model / "model.safetensors").read_bytes()
    (tiny_model / "model.safetensors").write_bytes(data[: len(data) // 2])  # truncated weights
    with pytest.raises(ConfigError, match="not a readable safetensors file"):
        check_model_dir(tiny_model)


def test_sentinels_that_leave_no_room_in_the_vocabulary_are_one_line(project):
    with pytest.raises(ConfigError, match="sentinels"):
        load_params(None, ["tokenizer.unigram.vocab_size=300", "tokenizer.unigram.sentinels=300"])
    line = refused(["tokenizer", "--kind", "unigram", "--set", "tokenizer.unigram.vocab_size=300",
                    "--set", "tokenizer.unigram.sentinels=1000"], what="invalid configuration")
    assert "tokenizer.unigram: sentinels (1000)" in line and "below 291" in line
    load_params(None, ["tokenizer.unigram.vocab_size=300", "tokenizer.unigram.sentinels=290"])  # the last that fits


def test_a_vocabulary_too_small_for_the_corpus_is_a_config_error():
    from lmforge.config import TokenizerConfig, UnigramConfig
    from lmforge.tokenization.train import train_kind

    cfg = TokenizerConfig(unigram=UnigramConfig(vocab_size=100, sentinels=90))
    with pytest.raises(ConfigError, match="too few for the corpus's characters"):
        train_kind("unigram", lambda: iter([f"text number {i} with some letters" for i in range(50)]), cfg)


@pytest.mark.parametrize("task", [".", "..", "data/..", "hf:..", "tasks/./"])
def test_task_names_dot_and_dot_dot_are_one_line(project, task):
    with pytest.raises(ConfigError, match="does not name a task"):
        load_params(None, [f"finetune.tasks=[{json.dumps(task)}]"])
    refused(["finetune", "gpt", "--task", task], what="does not name a task")


def test_an_absurd_model_size_in_a_recipe_is_refused_before_it_is_allocated():
    from lmforge.config import TrainConfig
    from lmforge.training.run import check_trainable

    cfg = TrainConfig(accelerator="cpu")
    assert check_trainable(cfg, "gpt-tiny", "lm", {"vocab_size": 300}, "pipelines/gpt.yaml: sizes.tiny") > 0
    with pytest.raises(ConfigError, match=r"pipelines/gpt.yaml: sizes.tiny: .* parameters; training them needs"):
        check_trainable(cfg, "gpt-tiny", "lm", {"d_model": 1 << 20, "d_ff": 1 << 22, "n_layers": 64},
                        "pipelines/gpt.yaml: sizes.tiny")
    with pytest.raises(ConfigError, match="more than 20,000 modules"):
        check_trainable(cfg, "gpt-tiny", "lm", {"n_layers": 10_000_000}, "pipelines/gpt.yaml: sizes.tiny")
    with pytest.raises(ConfigError, match="cannot be built"):
        check_trainable(cfg, "gpt-tiny", "lm", {"n_layers": "many"}, "pipelines/gpt.yaml: sizes.tiny")
