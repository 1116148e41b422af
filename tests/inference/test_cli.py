"""The commands end to end on a tiny project: pretrain and fine-tune GPT, then ``predict`` gives
the test accuracy the fine-tuning reported, ``export`` keeps the label names, ``generate`` and
``embed`` run, and bad input is one line and a non-zero exit."""

import json
import re

import pandas as pd
import pytest
import transformers
from click.testing import CliRunner

from lmforge.cli import main

from ..training.conftest import tiny_data  # noqa: F401  (the fixture)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data):  # noqa: F811
    """A project whose GPT is pretrained (4 steps) and fine-tuned on the CSV task (2 steps)."""
    from ..training.conftest import share_tiny_data

    root = tmp_path_factory.mktemp("use")
    params = str(share_tiny_data(tiny_data, root, tracking={"enabled": False}))
    runner = CliRunner()
    for command in (["dataset", "clm"], ["pretrain", "gpt"], ["finetune", "gpt", "--task", str(root / "task")]):
        result = runner.invoke(main, [*command, "--params", params])
        assert result.exit_code == 0, result.output
    return root, params


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_predict_gives_the_reported_test_accuracy(trained, tmp_path):
    root, params = trained
    metrics = json.loads((root / "models" / "gpt" / "task" / "metrics.json").read_text())
    out = tmp_path / "p.jsonl"
    result = invoke("predict", "gpt", "--task", root / "task", "--params", params, "--file", root / "task" / "test.csv",
                    "-o", out)
    assert result.exit_code == 0, result.output
    rows = pd.read_json(out, lines=True)
    gold = pd.read_csv(root / "task" / "test.csv")["label"]
    assert (rows["label"] == gold).mean() == pytest.approx(metrics["test"]["accuracy"])
    assert set(rows.columns) >= {"text", "label", "score", "p_no", "p_yes"}
    line = invoke("predict", root / "models" / "gpt" / "task", "Alpha beta gamma delta.")
    assert line.exit_code == 0 and line.output.split("\t")[0] in ("no", "yes")


def test_export_generate_embed(trained, tmp_path):
    root, params = trained
    result = invoke("export", root / "models" / "gpt" / "task", tmp_path / "hf")
    assert result.exit_code == 0, result.output
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "hf"))
    assert set(hf.config.id2label.values()) == {"no", "yes"}
    result = invoke("export", root / "models" / "gpt" / "task", tmp_path / "onnx", "--format", "onnx")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "onnx" / "onnx.json").read_text())["labels"] == ["no", "yes"]
    result = invoke("generate", "gpt", "The", "--params", params, "--max-new-tokens", 5)
    assert result.exit_code == 0 and len(result.output) > 1  # what a 4-step model writes (often spaces) and a newline
    result = invoke("embed", "gpt", "--params", params, "--file", root / "task" / "test.csv", "-o", tmp_path / "e.npy")
    assert result.exit_code == 0, result.output
    import numpy as np
    assert np.load(tmp_path / "e.npy").shape[0] == len(pd.read_csv(root / "task" / "test.csv"))


@pytest.mark.parametrize("args, message", [
    (["generate", "{gpt}", "  "], "the prompt is empty"),
    (["generate", "{clf}", "The"], "classifier"),
    (["fill-mask", "{gpt}", "The [MASK]."], "does not fill blanks"),
    (["generate", "{missing}", "The"], "no trained model"),
    (["predict", "{gpt}", "The"], "pretrained model, not a fine-tuned one"),
])
def test_bad_input_is_one_line(trained, tmp_path, args, message):
    root, _ = trained
    paths = {"gpt": root / "models" / "gpt" / "pretrain", "clf": root / "models" / "gpt" / "task",
             "missing": tmp_path / "nothing"}
    result = invoke(*[a.format(**paths) for a in args])
    assert result.exit_code != 0
    assert result.output.strip().startswith("error:") and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_evaluate_harness_scores_a_transformers_export_as_the_folder_it_came_from(trained, tmp_path):
    """`lmforge evaluate --harness TASK --model DIR` on the pretrained GPT folder and on its
    `lmforge export`: the same scores (the same log-likelihoods, through lm-eval)."""
    pytest.importorskip("lm_eval")
    from lmforge.evaluation.harness_task import write_task

    root, params = trained
    rows = [{"context": f"The {w} of the", "choices": ["object is returned.", "file is read.", "cat sat down.", "end."],
             "gold": i % 4} for i, w in enumerate(["name", "size", "path", "mode", "owner", "length"])]
    task = write_task(rows, tmp_path / "task", name="tiny_cli")
    folder = root / "models" / "gpt" / "pretrain" / "model"
    assert invoke("export", folder, tmp_path / "hf").exit_code == 0
    ours = invoke("evaluate", "--harness", task, "--model", folder, "--params", params)
    theirs = invoke("evaluate", "--harness", task, "--model", tmp_path / "hf", "--params", params)
    assert ours.exit_code == 0 and theirs.exit_code == 0, ours.output + theirs.output
    # (the runner mixes lm-eval's progress bars on stderr into the output)
    line = [re.search(r"tiny_cli: [^\r\n]*", r.output).group(0) for r in (ours, theirs)]
    assert ", acc " in line[0] and ", acc_norm " in line[0] and line[0].endswith(", n 6")
    assert line[0] == line[1]
    # beneath the accuracies: the same log-likelihood of every choice from both folders
    from lmforge.evaluation.zero_shot import folder_scorer

    pairs = [(r["context"], " " + c) for r in rows for c in r["choices"]]
    a, b = (folder_scorer(f).loglikelihood(pairs) for f in (folder, tmp_path / "hf"))
    assert [x[0] for x in a] == pytest.approx([x[0] for x in b], abs=1e-4) and [x[1] for x in a] == [x[1] for x in b]
    # one line and exit 2 for what cannot be scored
    bad = invoke("evaluate", "--harness", task, "--model", tmp_path, "--params", params)
    assert bad.exit_code == 2 and "neither an lmforge model folder" in bad.output
    assert invoke("evaluate", "--harness", task, "--params", params).exit_code == 2  # no --model
