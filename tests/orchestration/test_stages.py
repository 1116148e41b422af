"""The stage registry: the graph follows params.yaml and the recipes, its edges are what the
stages read, and the committed dvc.yaml is its current DVC view."""

from __future__ import annotations

import difflib
import re
import shutil

import pytest
import yaml
from click.testing import CliRunner

from lmforge.cli import main
from lmforge.config import ConfigError
from lmforge.stages import GROUPS, build_stages, dvc_stages, dvc_yaml

from .conftest import REPO, dvc_graph_of, edit_recipe, graph_project, tiny_params

KINDS = {"clean", "quality", "tokenizer", "tokens", "dataset", "pretrain", "finetune", "evaluate", "report"}


# ----------------------------------------------------------------------------- the committed dvc.yaml


def test_committed_dvc_yaml_is_current():
    expected = dvc_yaml(build_stages(root=REPO))
    committed = (REPO / "dvc.yaml").read_text(encoding="utf-8")
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), expected.splitlines(True),
                                             "dvc.yaml (committed)", "dvc.yaml (from params.yaml)"))[:60])
    assert committed == expected, f"dvc.yaml is stale: run `lmforge dvc` and commit it\n{diff}"


def test_dvc_check_exits_0_when_current_and_1_when_stale(tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(REPO)
    res = runner.invoke(main, ["dvc", "--check"])
    assert res.exit_code == 0, res.output
    assert "up to date" in res.output

    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "pipelines", copy / "pipelines")
    (copy / "src").symlink_to(REPO / "src")  # the code deps are listed only where the project has them
    monkeypatch.chdir(copy)
    assert runner.invoke(main, ["dvc", "--check"]).exit_code == 0

    params = yaml.safe_load((copy / "params.yaml").read_text(encoding="utf-8"))
    params["train"]["architectures"] = ["gpt", "t5"]
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    before = (copy / "dvc.yaml").read_text(encoding="utf-8")
    res = runner.invoke(main, ["dvc", "--check"])
    assert res.exit_code == 1
    assert "stale" in res.output and "lmforge dvc" in res.output
    assert (copy / "dvc.yaml").read_text(encoding="utf-8") == before  # --check writes nothing

    res = runner.invoke(main, ["dvc"])
    assert res.exit_code == 0 and "written" in res.output, res.output
    stages = yaml.safe_load((copy / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert "pretrain_t5" in stages and "pretrain_bert" not in stages
    assert runner.invoke(main, ["dvc", "--check"]).exit_code == 0
    assert "up to date" in runner.invoke(main, ["dvc"]).output

    (copy / "dvc.yaml").write_text(before.replace("cmd: lmforge pretrain gpt", "cmd: lmforge pretrain gpt --x"), encoding="utf-8")
    assert runner.invoke(main, ["dvc", "--check"]).exit_code == 1  # a hand edit is stale too


def test_stages_command_lists_the_graph(graph_root, monkeypatch):
    params = graph_project(graph_root)
    (graph_root / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False), encoding="utf-8")
    monkeypatch.chdir(graph_root)
    res = CliRunner().invoke(main, ["stages"])
    assert res.exit_code == 0, res.output
    assert [line.split()[0] for line in res.output.splitlines()] == list(build_stages(params, root=graph_root).stages)


# ----------------------------------------------------------------------------- the graph follows the configuration


def names(graph) -> set[str]:
    return set(graph.stages)


def test_tiny_graph(graph_root):
    graph = build_stages(graph_project(graph_root), root=graph_root)
    assert list(graph.stages) == ["clean", "tokenizer_bpe", "tokens_bpe", "dataset_clm", "pretrain_gpt",
                                  "finetune_gpt_task", "finetune_scratch_gpt_task", "evaluate_gpt", "report"]
    assert graph.edges() == {
        ("clean", "tokenizer_bpe"), ("clean", "tokens_bpe"), ("tokenizer_bpe", "tokens_bpe"),
        ("tokens_bpe", "dataset_clm"), ("tokenizer_bpe", "dataset_clm"),
        ("dataset_clm", "pretrain_gpt"), ("tokens_bpe", "pretrain_gpt"), ("tokenizer_bpe", "pretrain_gpt"),
        ("pretrain_gpt", "finetune_gpt_task"), ("tokenizer_bpe", "finetune_gpt_task"),
        ("pretrain_gpt", "evaluate_gpt"), ("finetune_gpt_task", "evaluate_gpt"), ("evaluate_gpt", "report"),
        ("clean", "evaluate_gpt"),  # the zero-shot harness (on by default) reads the held-out documents
        # the from-scratch control needs no pretrained model
        ("tokenizer_bpe", "finetune_scratch_gpt_task"), ("finetune_scratch_gpt_task", "evaluate_gpt"),
    }
    assert graph["clean"].deps[0] == "corpus.jsonl"
    assert graph["finetune_gpt_task"].deps[2] == "task"  # the task folder is a dependency
    assert graph["pretrain_gpt"].key == {"arch": "gpt", "objective": "clm", "kind": "bpe"}
    assert graph["finetune_scratch_gpt_task"].command == ("finetune", "gpt", "--task", "task", "--from-scratch")
    assert graph["finetune_scratch_gpt_task"].paths == ["models/gpt/task-scratch"]
    without = build_stages(graph_project(graph_root, finetune={"tasks": ["task"], "scratch_control": False}), root=graph_root)
    assert "finetune_scratch_gpt_task" not in without.stages
    assert graph["pretrain_gpt"].subprocess and not graph["dataset_clm"].subprocess


def test_the_harness_adds_the_corpus_and_its_task_files_to_evaluate_only_when_asked(graph_root):
    plain = build_stages(graph_project(graph_root, evaluate={"harness": []}), root=graph_root)["evaluate_gpt"]
    default = build_stages(graph_project(graph_root), root=graph_root)["evaluate_gpt"]
    assert default.deps == (*plain.deps, "data/clean")  # on by default: docstring_next
    (graph_root / "mine.yaml").write_text("task: mine\n")
    asked = build_stages(graph_project(graph_root, evaluate={"harness": ["docstring_next", "mine.yaml", "hellaswag"]}),
                         root=graph_root)["evaluate_gpt"]
    assert "evaluate.harness" not in plain.params and "clean" not in plain.upstream
    assert asked.deps == (*plain.deps, "data/clean", "mine.yaml")
    assert asked.upstream == (*plain.upstream, "clean")
    assert asked.params == (*plain.params, "evaluate.harness", "evaluate.harness_questions", "train.seed")


def test_an_evaluate_stage_reads_its_recipes_time_to_pay_where_the_recipe_gives_one(graph_root):
    graph = build_stages(graph_project(graph_root, train={"architectures": ["gpt", "elmo"]}), root=graph_root)
    gpt, elmo = graph["evaluate_gpt"], graph["evaluate_elmo"]
    assert (gpt.recipe, gpt.recipe_params) == ("pipelines/gpt.yaml", ("sizes.tiny.time_to_pay",))
    assert "pipelines/gpt.yaml" in gpt.code and "pipelines/gpt.yaml" not in gpt.deps
    assert (elmo.recipe, elmo.recipe_params) == ("", ())  # no curve of ELMo's recipe as shipped
    assert {"pipelines/gpt.yaml": ["sizes.tiny.time_to_pay"]} in dvc_stages(graph)["stages"]["evaluate_gpt"]["params"]


def test_the_evaluate_stage_records_the_recipes_time_to_pay(graph_root, monkeypatch):
    from lmforge.evaluation.stage import recipe_time_to_pay

    params = graph_project(graph_root, train={"architectures": ["gpt", "elmo"]})
    monkeypatch.chdir(graph_root)
    gpt = recipe_time_to_pay(params, "gpt")
    assert {k: gpt[k] for k in ("minutes", "measured", "task")} == {"minutes": 4.0, "measured": [1.0, 2.0, 4.0],
                                                                   "task": "docstring_package"}
    assert gpt["source"].startswith("BENCHMARKS.md: 2026-11-28")
    assert recipe_time_to_pay(params, "elmo") is None


def test_an_architecture_adds_its_stages_without_code_changes(graph_root):
    gpt = build_stages(graph_project(graph_root), root=graph_root)
    both = build_stages(graph_project(graph_root, train={"architectures": ["gpt", "t5"]}), root=graph_root)
    # t5 needs span corruption over unigram tokens, though neither is in dataset.objectives / tokenizer.kinds
    assert names(both) - names(gpt) == {"tokenizer_unigram", "tokens_unigram", "dataset_span_corruption",
                                        "pretrain_t5", "finetune_t5_task", "finetune_scratch_t5_task", "evaluate_t5"}
    assert names(gpt) <= names(both)
    assert set(both["report"].upstream) == {"evaluate_gpt", "evaluate_t5"}
    assert both["pretrain_t5"].upstream == ("dataset_span_corruption", "tokens_unigram", "tokenizer_unigram")
    # the recipe is a parameters file (its keys in recipe_params), not a dependency, and part of the code version
    assert both["pretrain_t5"].recipe == "pipelines/t5.yaml" and "pipelines/t5.yaml" not in both["pretrain_t5"].deps
    assert "sizes.tiny.pretrain" in both["pretrain_t5"].recipe_params and "pipelines/t5.yaml" in both["pretrain_t5"].code
    assert both["finetune_t5_task"].key == {"arch": "t5", "task": "task", "init": "pretrained"}
    # ... and to the DVC view
    assert set(dvc_stages(both)["stages"]) == names(both)
    assert set(dvc_stages(both)["plots"][0]["pretraining_loss"]["y"]) == {"data/report/plots/loss_gpt.csv",
                                                                         "data/report/plots/loss_t5.csv"}


def test_a_task_adds_a_finetuning_stage_per_architecture(graph_root):
    one = build_stages(graph_project(graph_root, train={"architectures": ["gpt", "t5"]}), root=graph_root)
    two = build_stages(graph_project(graph_root, train={"architectures": ["gpt", "t5"]},
                                     finetune={"tasks": ["task", "data/Other Task", "docstring_kind"]}), root=graph_root)
    added = names(two) - names(one)
    # a local task folder is named by its last component, in the stage name and the output folder alike
    assert added == {f"finetune_{init}{a}_{t}" for a in ("gpt", "t5") for t in ("other_task", "docstring_kind")
                     for init in ("", "scratch_")}
    assert "data/Other Task" in two["finetune_gpt_other_task"].deps
    assert two["finetune_gpt_other_task"].paths == ["models/gpt/Other-Task"]
    assert {"finetune_gpt_other_task", "finetune_gpt_docstring_kind"} < set(two["evaluate_gpt"].upstream)
    # the default task is built from the clean corpus
    assert "clean" in two["finetune_t5_docstring_kind"].upstream and "data/clean" in two["finetune_t5_docstring_kind"].deps
    assert two["finetune_gpt_docstring_kind"].command == ("finetune", "gpt", "--task", "docstring_kind")
    # ... and so is the package task
    three = build_stages(graph_project(graph_root, train={"architectures": ["gpt"]},
                                       finetune={"tasks": ["docstring_package"]}), root=graph_root)
    assert "clean" in three["finetune_gpt_docstring_package"].upstream
    assert "data/clean" in three["finetune_gpt_docstring_package"].deps


def test_each_task_family_gets_stages_for_the_architectures_that_fit_it_in_its_own_group(graph_root):
    import json

    summaries = graph_root / "data" / "summaries"
    summaries.mkdir(parents=True)
    for split in ("train", "test"):
        (summaries / f"{split}.jsonl").write_text(json.dumps({"article": "A long text. More.", "highlights": "A text."})
                                                  + "\n", encoding="utf-8")
    graph = build_stages(graph_project(graph_root, train={"architectures": ["gpt", "bert", "t5"]},
                                       finetune={"tasks": ["docstring_kind", "docstring_params", "docstring_qa",
                                                           "data/summaries"]}), root=graph_root)
    finetunes = {n for n in names(graph) if n.startswith("finetune_") and not n.startswith("finetune_scratch_")}
    # a generation task only for the architectures that write (bert does not)
    assert finetunes == {f"finetune_{a}_{t}" for a in ("gpt", "bert", "t5")
                         for t in ("docstring_kind", "docstring_params", "docstring_qa")} | \
        {"finetune_gpt_summaries", "finetune_t5_summaries"}
    assert "finetune_scratch_bert_summaries" not in graph.stages
    groups = {n: graph[n].group for n in finetunes}
    assert groups["finetune_bert_docstring_kind"] == "finetuning"
    assert groups["finetune_bert_docstring_params"] == "finetuning_tagging"
    assert groups["finetune_t5_docstring_qa"] == graph["finetune_scratch_t5_docstring_qa"].group == "finetuning_span_qa"
    assert groups["finetune_gpt_summaries"] == "finetuning_generation" and set(groups.values()) <= set(GROUPS)
    assert graph["finetune_t5_docstring_params"].key["family"] == "tagging"
    assert "family" not in graph["finetune_t5_docstring_kind"].key  # classification stays as it was


def test_objectives_and_kinds_without_architectures(graph_root):
    graph = build_stages(graph_project(graph_root, train={"architectures": []},
                                       tokenizer={"kinds": ["bpe", "wordpiece"]}, dataset={"objectives": ["clm", "mlm"]}),
                         root=graph_root)
    assert list(graph.stages) == ["clean", "tokenizer_bpe", "tokenizer_wordpiece", "tokens_bpe", "tokens_wordpiece",
                                  "dataset_clm", "dataset_mlm"]
    assert graph["dataset_mlm"].upstream == ("tokens_wordpiece", "tokenizer_wordpiece")
    assert "plots" not in dvc_stages(graph)  # no report, no loss plot


def test_an_objective_whose_tokenizer_is_not_built_is_an_error(graph_root):
    params = graph_project(graph_root, train={"architectures": []}, dataset={"objectives": ["clm", "mlm"]})
    with pytest.raises(ConfigError, match="mlm.*wordpiece"):
        build_stages(params, root=graph_root)


@pytest.mark.parametrize("archs", [["gpt"], ["gpt", "t5", "bert"]])
def test_repository_and_tiny_graphs_are_well_formed(graph_root, archs):
    tiny = build_stages(graph_project(graph_root, train={"architectures": archs}, finetune={"tasks": ["task", "docstring_kind"]}),
                        root=graph_root)
    for graph in (tiny, build_stages(root=REPO)):
        seen: set[str] = set()
        for stage in graph:
            assert re.fullmatch(r"[a-z0-9_]+", stage.name), stage.name
            assert stage.kind in KINDS and stage.group in GROUPS
            assert stage.command[0] in main.commands
            main.commands[stage.command[0]].make_context("lmforge", list(stage.command[1:]))  # the CLI accepts it
            for up in stage.upstream:  # topological: upstream first; and what it reads is a dependency
                assert up in seen, f"{stage.name} comes before its upstream {up}"
                missing = [o.path for o in graph[up].outputs if o.kind == "out" and o.path not in stage.deps]
                assert not missing, f"{stage.name} reads from {up} but does not depend on {missing}"
            seen.add(stage.name)
        outputs = [(p, s.name) for s in graph for p in s.paths]
        for i, (a, sa) in enumerate(outputs):
            for b, sb in outputs[i + 1:]:
                assert not (a == b or a.startswith(b + "/") or b.startswith(a + "/")), f"{sa} and {sb} both write {a}, {b}"


def test_dvc_derives_the_same_edges_as_the_registry():
    """DVC builds its graph from deps and outs: those edges must be exactly the registry's (the
    Dagster asset graph's), or `dvc repro` and Dagster would not agree on what a change re-runs."""
    graph = build_stages(root=REPO)
    doc = dvc_stages(graph)["stages"]
    assert dvc_graph_of(doc) == (set(graph.stages), graph.edges())
    for name, entry in doc.items():
        s = graph[name]
        assert entry["cmd"] == s.cli and entry["params"] == [*s.params, *([{s.recipe: list(s.recipe_params)}] if s.recipe else [])]


# ----------------------------------------------------------------------------- paths, errors, code versions


def test_paths_inside_the_project_are_relative_and_outside_is_an_error_for_dvc(graph_root, tmp_path):
    inside = build_stages(graph_project(graph_root, clean={"output": str(graph_root / "data" / "corpus")}), root=graph_root)
    assert inside["clean"].paths == ["data/corpus", "data/corpus.metrics.json"] and "data/corpus" in inside["tokens_bpe"].deps

    elsewhere = tmp_path / "elsewhere" / "models"
    graph = build_stages(graph_project(graph_root, train={"output": str(elsewhere)}), root=graph_root)
    assert graph["pretrain_gpt"].paths == [(elsewhere / "gpt" / "pretrain").as_posix()]  # the graph still works
    with pytest.raises(ConfigError, match=re.escape(str(elsewhere / "gpt" / "pretrain"))):
        dvc_stages(graph)


def test_two_stages_writing_the_same_path_is_an_error(graph_root):
    with pytest.raises(ConfigError, match="tokenizer_bpe and tokens_bpe both write data/tokenizers/bpe"):
        build_stages(graph_project(graph_root, tokenize={"output": "data/tokenizers"}), root=graph_root)


@pytest.mark.parametrize("damage", ["missing", "invalid"])
def test_a_bad_recipe_is_an_error_naming_the_file(graph_root, damage):
    params = graph_project(graph_root, train={"architectures": ["gpt", "t5"]})
    recipe = graph_root / "pipelines" / "t5.yaml"
    if damage == "missing":
        recipe.unlink()
    else:
        recipe.write_text(recipe.read_text(encoding="utf-8") + "\nlearning_rat: 0.1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pipelines/t5\.yaml"):
        build_stages(params, root=graph_root)


def test_code_version_follows_the_recipe(graph_root):
    params = graph_project(graph_root)
    before = build_stages(params, root=graph_root)
    versions = {s.name: before.code_version(s) for s in before}
    assert versions == {s.name: build_stages(params, root=graph_root).code_version(s) for s in before}  # stable
    assert before["pretrain_gpt"].code == ("pipelines/gpt.yaml",)  # no src/ in this project
    edit_recipe(graph_root, "gpt", max_steps=7)
    after = build_stages(params, root=graph_root)
    changed = {s.name for s in after if after.code_version(s) != versions[s.name]}
    # the evaluate stage reads the recipe's time_to_pay: the recipe is part of its code version too
    assert changed == {"pretrain_gpt", "finetune_gpt_task", "finetune_scratch_gpt_task", "evaluate_gpt"}


def test_lmforge_dvc_names_the_keys_a_short_params_yaml_leaves_out(tmp_path, monkeypatch):
    """DVC reads a stage's parameters from params.yaml itself, not from lmforge's defaults: a
    file that leaves them out is refused with the missing keys named, and nothing is written."""
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"train": {"architectures": ["gpt"]}}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in (["dvc"], ["dvc", "--check"]):
        res = runner.invoke(main, args)
        assert res.exit_code == 2, res.output
        assert "does not spell out" in res.output and "tokenizer.bpe" in res.output and "train.seed" in res.output
    assert not (tmp_path / "dvc.yaml").exists()


def test_augmentation_makes_the_masked_lm_an_input_of_both_fine_tuning_arms(graph_root):
    params = graph_project(graph_root, train={"architectures": ["gpt", "bert"]})
    path = graph_root / "pipelines" / "gpt.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    recipe["finetune"]["augment"] = {"copies": 1, "model": "bert"}
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    graph = build_stages(params, root=graph_root)
    for name in ("finetune_gpt_task", "finetune_scratch_gpt_task"):
        assert "pretrain_bert" in graph[name].upstream and "models/bert/pretrain" in graph[name].deps


def test_every_kinds_code_paths_exist_in_the_repository():
    """The graph leaves out a kind's code path that does not exist (a project outside the repository
    has no src/), so a path that moved would silently leave DVC's dependencies and Dagster's code
    versions; in the repository every one must exist."""
    from pathlib import Path

    from lmforge.stages.kinds import KINDS

    root = Path(__file__).resolve().parents[2]
    missing = {name: p for name, kind in KINDS.items() for p in kind.code if not (root / p).exists()}
    assert missing == {}


def test_each_kind_declares_only_its_own_stages_and_the_graph_is_their_union(graph_root):
    from lmforge.stages import KINDS as SPECS
    from lmforge.stages.context import GraphContext

    params = graph_project(graph_root, train={"architectures": ["gpt", "bert", "t5"]})
    ctx = GraphContext.create(params, graph_root)
    declared_by: dict[str, set[str]] = {}
    for spec in SPECS.values():
        before = set(ctx.stages)
        spec.declare(ctx)
        declared_by[spec.name] = set(ctx.stages) - before
        assert {ctx.stages[n].kind for n in declared_by[spec.name]} <= {spec.name}
    graph = build_stages(params, root=graph_root)
    assert list(graph.stages) == list(ctx.stages)  # in the kinds' order
    assert declared_by["pretrain"] == {"pretrain_gpt", "pretrain_bert", "pretrain_t5"}
    assert declared_by["quality"] == set()  # quality.enabled is false
    # the graph adds each kind's code to its stages' inputs and its kind to each stage
    for stage in graph:
        assert stage.spec is SPECS[stage.kind]
        assert ctx.stages[stage.name].deps == stage.deps[:len(ctx.stages[stage.name].deps)]


def test_a_stage_outside_a_graph_says_so_when_run(graph_root):
    from lmforge.stages import Output, Stage

    stage = Stage(name="clean", kind="clean", description="", command=("clean",), upstream=(), deps=(), params=(),
                  outputs=(Output("data/clean"),))
    with pytest.raises(RuntimeError, match="not part of a graph"):
        stage.summary({})
