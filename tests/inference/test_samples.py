"""The evaluate stage's samples: what each kind of pretrained model writes for the fixed prompts."""

from lmforge.inference.fill_mask import fill_mask
from lmforge.inference.generate import Settings, generate_text
from lmforge.inference.loading import load
from lmforge.inference.samples import FILL_PROMPTS, GENERATE_PROMPTS, NEW_TOKENS, samples, samples_markdown


def test_each_kind_writes_its_samples(models):
    gpt = load(models["gpt"])
    got = samples(gpt)
    assert [s["prompt"] for s in got] == list(GENERATE_PROMPTS)
    assert got[0]["output"] == generate_text(gpt, GENERATE_PROMPTS[0], Settings(max_new_tokens=NEW_TOKENS))
    bert = load(models["bert"])
    got = samples(bert)
    assert [s["prompt"] for s in got] == list(FILL_PROMPTS)
    assert got[1]["output"].startswith(fill_mask(bert, FILL_PROMPTS[1]).sequence)
    assert len(samples(load(models["t5"]))) == len(FILL_PROMPTS)
    assert samples(load(models["elmo"])) == []


def test_the_markdown_table_escapes_cells():
    table = samples_markdown({"gpt": [{"prompt": "a | b", "output": "line\nnext"}], "elmo": []})
    assert "| gpt | a \\| b | line next |" in table
    assert samples_markdown({"elmo": []}) == ""


def test_the_evaluate_assets_metadata_shows_the_samples(tmp_path):
    import json
    from types import SimpleNamespace

    from lmforge.stages.kind import Markdown
    from lmforge.stages.kinds import evaluate

    record = tmp_path / "gpt.json"
    record.write_text(json.dumps({"pretrain": {"validation": {"loss": 5.0}}, "finetune": {},
                                  "samples": [{"prompt": "Return the", "output": " value."}]}))
    meta = evaluate.metadata(SimpleNamespace(key={"arch": "gpt"}), None, record)
    assert isinstance(meta["samples"], Markdown) and "| gpt | Return the | value. |" in meta["samples"].text


def test_the_evaluate_assets_metadata_shows_the_harness_scores_who_scored_them_and_what_was_skipped(tmp_path):
    import json
    from types import SimpleNamespace

    from lmforge.stages.kinds import evaluate

    record = tmp_path / "t5.json"
    harness = {"tasks": ["docstring_next", "mine.yaml"], "scored_by": "lm-eval 0.4.13",
               "pretrained": {"mine": {"acc": 0.5, "n": 8}}, "untrained": {"mine": {"acc": 0.25, "n": 8}},
               "skipped": {"docstring_next": "docstring_next: no questions"}}
    record.write_text(json.dumps({"pretrain": {"validation": {"loss": 5.0}}, "finetune": {}, "harness": harness}))
    meta = evaluate.metadata(SimpleNamespace(key={"arch": "t5"}), None, record)
    assert meta["harness/scored_by"] == "lm-eval 0.4.13"
    assert meta["harness/docstring_next/skipped"] == "docstring_next: no questions"
    assert meta["harness/mine/pretrained/acc"] == 0.5 and meta["harness/mine/untrained/acc"] == 0.25
