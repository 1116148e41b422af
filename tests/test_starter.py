"""The starter project and the recipe parameters: ``lmforge init`` writes params.yaml and the
recipes into a folder; the checkout's own are the starter's; a recipe value is a parameter
``--set <recipe>:<key>=<value>`` reaches, and DVC's view names it in the recipe file."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from lmforge.cli import main
from lmforge.config import ConfigError, load_params
from lmforge.stages import build_stages, dvc_yaml
from lmforge.starter import folder, init_project
from lmforge.config.recipes import load_recipe, recipe_file, size_recipe

ROOT = Path(__file__).resolve().parents[1]


def test_the_checkout_is_the_starter_project():
    starter = folder()
    assert (ROOT / "params.yaml").read_bytes() == (starter / "params.yaml").read_bytes()
    cmp = filecmp.dircmp(ROOT / "pipelines", starter / "pipelines", ignore=["__pycache__"])
    assert not (cmp.left_only or cmp.right_only or cmp.diff_files), (cmp.left_only, cmp.right_only, cmp.diff_files)


def test_init_writes_the_starter_and_keeps_a_project_own_files(tmp_path):
    runner = CliRunner()
    done = runner.invoke(main, ["init", str(tmp_path / "p")])
    assert done.exit_code == 0, done.output
    assert "10 recipes" in done.output
    assert load_params(tmp_path / "p" / "params.yaml") == load_params(ROOT / "params.yaml")
    assert sorted(f.name for f in (tmp_path / "p" / "pipelines").glob("*.yaml")) == sorted(
        f.name for f in (ROOT / "pipelines").glob("*.yaml"))

    (tmp_path / "p" / "params.yaml").write_text("train:\n  size: base\n", encoding="utf-8")
    again = runner.invoke(main, ["init", str(tmp_path / "p")])
    assert again.exit_code == 2 and "params.yaml exists" in again.output and "--force" in again.output
    assert (tmp_path / "p" / "params.yaml").read_text(encoding="utf-8") == "train:\n  size: base\n"
    forced = runner.invoke(main, ["init", str(tmp_path / "p"), "--force"])
    assert forced.exit_code == 0 and load_params(tmp_path / "p" / "params.yaml").train.size == "tiny"

    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a folder"):
        init_project(tmp_path / "file")


def test_without_a_recipes_folder_the_packaged_recipes_are_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = load_params("params.yaml")  # no params.yaml: the defaults
    assert recipe_file(params, "t5") == folder() / "pipelines" / "t5.yaml"
    assert load_recipe(params, "t5").objective == "span_corruption"
    with pytest.raises(ConfigError, match="lmforge init"):  # DVC could not track a packaged recipe
        dvc_yaml(build_stages(params, root=tmp_path))
    (tmp_path / "pipelines").mkdir()  # a recipes folder without the file: an error, not the starter
    with pytest.raises(ConfigError, match=r"pipelines/t5.yaml: no recipe .*lmforge init"):
        load_recipe(params, "t5")


def test_set_reaches_a_recipe_value_of_one_architecture():
    params = load_params(ROOT / "params.yaml", ["pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.003",
                                                "pipelines/gpt.yaml:finetune.pooling=default"])
    gpt = load_recipe(params, "gpt", root=ROOT)
    assert size_recipe(params, gpt).pretrain.learning_rate == 0.003 and gpt.finetune.pooling == "default"
    plain = load_params(ROOT / "params.yaml")
    assert size_recipe(plain, load_recipe(plain, "gpt", root=ROOT)).pretrain.learning_rate == 0.002
    assert load_recipe(params, "bert", root=ROOT) == load_recipe(plain, "bert", root=ROOT)
    assert "recipe_overrides" not in params.model_dump()  # never written to params.yaml


@pytest.mark.parametrize("item,words", [
    ("pipelines/gtp.yaml:sizes.tiny.pretrain.learning_rate=1", "pipelines/gtp.yaml is not a recipe"),
    ("params.yaml:train.seed=1", "params.yaml is not a recipe"),
    ("pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate", "'pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate': expected KEY=VALUE"),
    ("pipelines/gpt.yaml:sizes.tiny.pretrain.learnin_rate=1", "sizes.tiny.pretrain.learnin_rate: unknown key"),
    ("pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=-1", "sizes.tiny.pretrain.learning_rate: Input should be greater"),
])
def test_a_bad_recipe_override_names_it(item, words):
    with pytest.raises(ConfigError, match=None) as err:
        load_recipe(load_params(ROOT / "params.yaml", [item]), "gpt", root=ROOT)
    assert words in str(err.value)


def test_recipe_params_file_keys_in_dvc_yaml(tmp_path):
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    recipe_params = {name: next((p["pipelines/gpt.yaml"] for p in s.get("params", []) if isinstance(p, dict)
                                 and "pipelines/gpt.yaml" in p), None)
                     for name, s in stages.items()}
    touching = {name for name, keys in recipe_params.items() if keys}
    assert touching == {n for n in stages if n.startswith(("pretrain_gpt", "finetune_gpt_", "finetune_scratch_gpt_",
                                                            "evaluate_gpt"))}
    assert recipe_params["evaluate_gpt"] == ["sizes.tiny.time_to_pay"]  # its measured time to pay, nothing else
    assert recipe_params["pretrain_gpt"] == ["objective", "sizes.tiny.preset", "sizes.tiny.model", "sizes.tiny.pretrain",
                                             "sizes.tiny.pretrain_model"]
    assert "sizes.tiny.finetune" in recipe_params["finetune_gpt_docstring_kind"]
    assert "finetune" in recipe_params["finetune_scratch_gpt_docstring_kind"]
    assert all("pipelines/gpt.yaml" not in s.get("deps", []) for s in stages.values())  # a parameters file, not a dependency
    data = yaml.safe_load((ROOT / "pipelines" / "gpt.yaml").read_text(encoding="utf-8"))
    for key in recipe_params["pretrain_gpt"] + recipe_params["finetune_gpt_docstring_kind"]:
        node = data
        for part in key.split("."):
            node = node[part]  # every key names a value the file writes (DVC refuses a missing one)


def test_each_recipes_time_to_pay_names_the_benchmarks_section_that_measured_it():
    headings = [line.lstrip("#").strip() for line in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("#")]
    found = 0
    for path in sorted((ROOT / "pipelines").glob("*.yaml")):
        for size, body in yaml.safe_load(path.read_text(encoding="utf-8"))["sizes"].items():
            ttp = body.get("time_to_pay")
            if ttp:
                found += 1
                section = ttp["source"].removeprefix("BENCHMARKS.md: ")
                assert any(h.startswith(section) for h in headings), f"{path.name} {size}: no section {section!r}"
    assert found >= 6
