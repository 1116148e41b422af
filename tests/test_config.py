from pathlib import Path

import pytest

from lmforge.config import ConfigError, Params, load_params

ROOT = Path(__file__).resolve().parents[1]


def test_repository_params_are_valid_and_are_the_defaults():
    assert load_params(ROOT / "params.yaml") == Params()


def write(tmp_path, text):
    p = tmp_path / "params.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text,key,words",
    [
        ("clean:\n  shard_sise: 10\n", "clean.shard_sise", "unknown key"),
        ("clean:\n  rules:\n    min_words_per_line: five\n", "clean.rules.min_words_per_line", "integer"),
        ("clean:\n  rules:\n    min_sentences: 0\n", "clean.rules.min_sentences", "greater than or equal to 1"),
        ("clean:\n  language:\n    threshold: 1.5\n", "clean.language.threshold", "less than or equal to 1"),
        ("clean:\n  line_dedup:\n    mode: paragraphs\n", "clean.line_dedup.mode", "'lines', 'sentence_spans' or 'off'"),
        ("clean:\n  rules:\n    citation_pattern: '[unclosed'\n", "clean.rules.citation_pattern", "not a valid regular expression"),
        ("tokenizers: {}\n", "tokenizers", "unknown key"),
    ],
)
def test_bad_params_name_the_key(tmp_path, text, key, words):
    with pytest.raises(ConfigError) as err:
        load_params(write(tmp_path, text))
    msg = str(err.value)
    assert f"{key}:" in msg and words in msg and str(tmp_path) in msg


def test_overrides(tmp_path):
    p = load_params(write(tmp_path, "clean:\n  workers: 2\n"), ["clean.rules.min_sentences=5", "clean.language.enabled=false", "clean.rules.curly_brace=null"])
    assert p.clean.workers == 2 and p.clean.rules.min_sentences == 5 and not p.clean.language.enabled
    with pytest.raises(ConfigError, match="clean.rules.min_sentences"):
        load_params(None, ["clean.rules.min_sentences=-1"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_params(None, ["clean.rules.min_sentences"])


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(write(tmp_path, "clean: [unclosed\n"))
    with pytest.raises(ConfigError, match="parameters file not found"):
        load_params(tmp_path / "other.yaml")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_params(write(tmp_path, "- a\n- b\n"))
