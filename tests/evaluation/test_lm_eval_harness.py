"""The harness through lm-eval itself: a local task (YAML + JSONL) scored by lm-eval's
simple_evaluate with our tiny GPT equals our own hand computation; the default task built from
documents; one clear line for an unknown task and for a missing lm-eval."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.evaluation.harness import CausalScorer, Question, score_questions
from lmforge.evaluation.harness_task import first_two_sentences, next_sentence_questions, write_task
from lmforge.evaluation.lm_eval_run import INSTALL, require_lm_eval, resolve_tasks, run_tasks
from lmforge.models.registry import build_model

from .test_harness import EOS, VOCAB, by_hand, encode

DOCS = [(f"doc{i:02d}", f"Line without sentences\nReturn the {w} of the object. The {w} is computed lazily "
                        f"from {i} parts.\nMore text here.") for i, w in enumerate(
    ["name", "size", "path", "mode", "owner", "length", "value", "type", "hash", "key"])]


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(5)
    return build_model("gpt-tiny", head="lm", vocab_size=VOCAB, n_positions=64).eval()


def test_the_default_task_asks_for_the_real_next_sentence():
    assert first_two_sentences(DOCS[0][1]) == ("Return the name of the object.", "The name is computed lazily from 0 parts.")
    assert first_two_sentences("one two three four") is None
    rows = next_sentence_questions(DOCS, seed=1)
    assert len(rows) == len(DOCS) and rows == next_sentence_questions(list(reversed(DOCS)), seed=1)
    assert rows != next_sentence_questions(DOCS, seed=2)
    for row, (_, text) in zip(rows, DOCS):  # documents in id order
        context, answer = first_two_sentences(text)
        assert row["context"] == context and row["choices"][row["gold"]] == answer
        assert len(row["choices"]) == 4 == len(set(row["choices"]))
    assert {r["gold"] for r in rows} != {rows[0]["gold"]}  # the real one is not always in the same place
    assert next_sentence_questions(DOCS[:3]) == []  # fewer documents than choices
    assert len(next_sentence_questions(DOCS, max_questions=4)) == 4
    # a second sentence several documents share is one distractor, never two copies
    twins = DOCS + [(f"twin{i}", "First sentence of the twin. The same second sentence everywhere.") for i in range(5)]
    assert all(len(set(r["choices"])) == 4 for r in next_sentence_questions(twins, seed=3))


def test_lm_evals_score_of_a_local_task_equals_a_hand_computation(gpt, tmp_path):
    pytest.importorskip("lm_eval")
    rows = next_sentence_questions(DOCS, seed=0) + [
        {"context": "Open a", "choices": ["file for reading", "cat", "é", "the socket of the server"], "gold": 0}]
    config = write_task(rows, tmp_path / "task", name="tiny_next")
    assert json.loads((tmp_path / "task" / "tiny_next.jsonl").read_text().splitlines()[-1])["choices"][2] == "é"
    scorer = CausalScorer(gpt, encode, prefix=[EOS], window=64)
    got = run_tasks(scorer, [str(config)], include_defaults=False)["tiny_next"]
    acc = norm = 0
    for r in rows:
        lls = [by_hand(gpt, r["context"], " " + c) for c in r["choices"]]
        acc += max(range(4), key=lambda i: (lls[i], -i)) == r["gold"]
        norm += max(range(4), key=lambda i: (lls[i] / len(r["choices"][i]), -i)) == r["gold"]
    assert got["n"] == len(rows) == 11
    assert got["acc"] == pytest.approx(acc / len(rows)) and got["acc_norm"] == pytest.approx(norm / len(rows))
    ours = score_questions(scorer, [Question(r["context"], tuple(r["choices"]), r["gold"]) for r in rows])
    assert {k: got[k] for k in ("acc", "acc_norm", "acc_bytes")} == pytest.approx(
        {k: ours[k] for k in ("acc", "acc_norm", "acc_bytes")})
    # by the name of a built task too
    assert run_tasks(scorer, ["tiny_next"], {"tiny_next": config}, include_defaults=False)["tiny_next"] == got


def test_an_unknown_task_is_one_clear_line(tmp_path):
    pytest.importorskip("lm_eval")
    config = write_task(next_sentence_questions(DOCS), tmp_path, name="tiny_next")
    with pytest.raises(ConfigError) as err:
        resolve_tasks(["tiny_next", "no_such_task"], {"tiny_next": config}, include_defaults=False)
    assert "unknown task 'no_such_task'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="no such task file"):
        resolve_tasks([str(tmp_path / "missing.yaml")])
    (tmp_path / "bad.yaml").write_text("dataset_path: json\n")
    with pytest.raises(ConfigError, match="names its task"):
        resolve_tasks([str(tmp_path / "bad.yaml")])


def test_without_lm_eval_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # import lm_eval raises ImportError
    with pytest.raises(ConfigError) as err:
        require_lm_eval()
    assert INSTALL in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="lmforge\\[eval\\]"):
        run_tasks(None, ["docstring_next"])
