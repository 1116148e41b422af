"""The quality stage as Dagster runs it: an asset between clean and the tokenizer, its checks
evaluated after it (the accuracy one a non-blocking warning), its figures shown."""

from __future__ import annotations

import random

import pytest
from dagster import AssetKey

from dagster_project.definitions import build_definitions
from lmforge.testing.documents import write_jsonl

from ..orchestration.test_dagster import check_evaluations, dagster_graph, make_project, materialize, materialized
from .test_quality import manual_page


@pytest.mark.slow
def test_dagster_materializes_the_quality_stage_and_its_checks(tmp_path):
    rng = random.Random(13)
    (tmp_path / "manual").mkdir()
    write_jsonl(tmp_path / "manual" / "pages.jsonl", [{"id": f"m{i}", "text": manual_page(rng)} for i in range(80)])
    root = make_project(tmp_path, quality={"enabled": True, "reference": ["manual"], "keep_fraction": 0.6},
                        checks={"clean_min_documents": 10})
    defs = build_definitions(root)
    nodes, edges = dagster_graph(defs)
    assert {("clean", "quality"), ("quality", "tokenizer_bpe"), ("quality", "tokens_bpe")} <= edges
    assert ("clean", "tokenizer_bpe") not in edges
    result = materialize(defs, ["clean", "quality"])
    assert result.success
    shown = materialized(result)["quality"]
    assert shown["documents_out"] == round(0.6 * shown["documents_in"])
    assert shown["validation_auc"] > 0.9  # manual pages against generic English pages: easy
    checks = check_evaluations(result)
    assert checks[("quality", "not_empty")].passed
    assert checks[("quality", "classifier_accuracy")].passed
    spec = defs.resolve_asset_graph().get_check_spec(next(k for k in defs.resolve_asset_graph().asset_check_keys
                                                         if k.asset_key == AssetKey("quality") and k.name == "classifier_accuracy"))
    assert not spec.blocking
