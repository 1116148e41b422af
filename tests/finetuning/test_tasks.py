"""Tasks: the default docstring task from a clean corpus, folder tasks, Hugging Face mapping."""

import json
import sys

import pytest

from lmforge.finetuning.tasks import DEFAULT_TASK, Example, Task, TaskError, carve_validation, load_task
from lmforge.finetuning.tasks.corpus_paragraphs import paragraphs
from lmforge.finetuning.tasks.hf import parse_hf_spec, task_from_hf
from lmforge.splits import split_of

from .conftest import SHORT_LINE, docstring_documents, params_at, write_docs

# ----------------------------------------------------------------------------- the default task


@pytest.fixture(scope="module")
def default_task(corpus):
    params, _ = corpus
    return load_task(DEFAULT_TASK, params, max_train=None, max_eval=None)


def test_labels_come_from_the_document_metadata(corpus, default_task):
    _, docs = corpus
    label_of = {d[0]: json.loads(d[2]).get("docstring_of") for d in docs}
    task = default_task
    assert task.label_names == ["module", "class", "function"] and not task.pair
    assert task.prefix == "docstring kind"
    for split, examples in task.splits.items():
        assert examples, split
        for e in examples:
            doc_id = e.id.rsplit("#", 1)[0]
            assert e.label == label_of[doc_id]
            assert e.text_pair is None
    for split in task.splits:  # every label in every split of this balanced corpus
        assert all(n > 0 for n in task.label_counts(split).values()), split


def test_split_is_the_documents_pretraining_split(corpus, default_task):
    params, _ = corpus
    seen = set()
    for split, examples in default_task.splits.items():
        for e in examples:
            doc_id = e.id.rsplit("#", 1)[0]
            assert split_of(doc_id, params.split) == split
            seen.add(doc_id)
    assert not any(d.startswith("web:") for d in seen)  # unlabelled documents are left out
    assert default_task.info["unlabelled_documents"] == 2


def test_min_words_filter_and_expected_paragraphs(corpus, default_task):
    _, docs = corpus
    expected = sorted(
        (d[0], i) for d in docs if json.loads(d[2]).get("docstring_of")
        for i, line in enumerate(d[1].split("\n")) if len(line.split()) >= 8
    )
    got = sorted((e.id.rsplit("#", 1)[0], int(e.id.rsplit("#", 1)[1])) for ex in default_task.splits.values() for e in ex)
    assert got == expected
    texts = [e.text for ex in default_task.splits.values() for e in ex]
    assert SHORT_LINE not in texts and all(len(t.split()) >= 8 for t in texts)
    fewer = load_task(DEFAULT_TASK, corpus[0], max_train=None, max_eval=None, min_words=20)
    assert all(len(e.text.split()) >= 20 for ex in fewer.splits.values() for e in ex)
    assert sum(map(len, fewer.splits.values())) < len(texts)


def test_paragraph_truncation_at_a_word_boundary():
    text = "short line\n" + " ".join(f"word{i}" for i in range(100))
    [(line, p)] = paragraphs(text, min_words=8, max_chars=60)
    assert line == 1 and len(p) <= 60 and p.endswith(tuple(f"word{i}" for i in range(100)))
    assert "  " not in p


def test_deterministic_and_independent_of_sharding(corpus, default_task, tmp_path):
    params, docs = corpus
    again = load_task(DEFAULT_TASK, params, max_train=None, max_eval=None)
    assert again.splits == default_task.splits
    write_docs(tmp_path / "clean", list(reversed(docs)), shards=3)
    resharded = load_task(DEFAULT_TASK, params_at(tmp_path), max_train=None, max_eval=None)
    assert resharded.splits == default_task.splits


def test_caps_are_seeded_order_keeping_samples(corpus, default_task):
    params, _ = corpus
    full = default_task.splits
    capped = load_task(DEFAULT_TASK, params, max_train=40, max_eval=10, seed=0)
    assert len(capped.splits["train"]) == 40
    assert all(len(capped.splits[s]) == min(10, len(full[s])) for s in ("validation", "test"))
    position = {e: i for i, e in enumerate(full["train"])}
    order = [position[e] for e in capped.splits["train"]]
    assert order == sorted(order)  # a subset, in the original order
    assert capped.info["uncapped"]["train"] == len(full["train"])
    assert load_task(DEFAULT_TASK, params, max_train=40, max_eval=10, seed=0).splits == capped.splits
    assert load_task(DEFAULT_TASK, params, max_train=40, max_eval=10, seed=1).splits["train"] != capped.splits["train"]


def test_max_train_default_comes_from_params(corpus):
    params, _ = corpus
    if not hasattr(params, "finetune"):
        pytest.skip("this Params has no finetune section")
    small = params.model_copy(update={"finetune": params.finetune.model_copy(update={"max_train_examples": 25})})
    assert len(load_task(DEFAULT_TASK, small).splits["train"]) == 25


def test_default_task_errors(tmp_path):
    with pytest.raises(TaskError, match="lmforge clean"):
        load_task(DEFAULT_TASK, params_at(tmp_path))  # no shards
    unlabelled = [(d[0], d[1], "{}") for d in docstring_documents(30)]
    write_docs(tmp_path / "clean", unlabelled)
    with pytest.raises(TaskError, match="docstring_of"):
        load_task(DEFAULT_TASK, params_at(tmp_path))
    bad = docstring_documents(30)
    bad[0] = (bad[0][0], bad[0][1], json.dumps({"docstring_of": "method"}))
    write_docs(tmp_path / "bad", bad)
    with pytest.raises(TaskError, match="'method'"):
        load_task(DEFAULT_TASK, params_at(tmp_path, clean=tmp_path / "bad"))
    broken = docstring_documents(30)
    broken[3] = (broken[3][0], broken[3][1], "{not json")
    write_docs(tmp_path / "broken", broken)
    with pytest.raises(TaskError, match="not valid JSON"):
        load_task(DEFAULT_TASK, params_at(tmp_path, clean=tmp_path / "broken"))


def test_unknown_specs():
    with pytest.raises(TaskError, match="unknown task"):
        load_task("sentiment", None)
    with pytest.raises(TaskError, match="no such directory"):
        load_task("./no/such/folder", None)
    with pytest.raises(TaskError, match="max_train"):
        load_task("./x", None, max_train=0)


# ----------------------------------------------------------------------------- folder tasks


def write_csv(path, header, rows):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_csv_single_sentences_with_int_labels_and_carved_validation(tmp_path):
    d = tmp_path / "my_task"
    d.mkdir()
    write_csv(d / "train.csv", ["sentence", "label"], [(f"train sentence number {i}, with a comma", i % 2) for i in range(50)])
    write_csv(d / "test.csv", ["sentence", "label"], [(f"test sentence {i}", (i + 1) % 2) for i in range(8)])
    task = load_task(str(d), None)
    assert task.name == "my_task" and task.prefix == "my task" and not task.pair
    assert task.label_names == ["0", "1"]
    assert len(task.splits["validation"]) == 5 and len(task.splits["train"]) == 45  # 10% carved
    assert not {e.text for e in task.splits["validation"]} & {e.text for e in task.splits["train"]}
    assert task.splits["train"][0].text == "train sentence number 0, with a comma"
    assert task.info["validation_carved_from_train"]
    assert load_task(str(d), None).splits == task.splits  # deterministic
    assert [e.label for e in task.splits["test"]][:2] == ["1", "0"]


def test_jsonl_pairs_with_validation_file(tmp_path):
    rows = [{"premise": f"p {i}", "hypothesis": f"h {i}", "label": ["entailment", "neutral", "contradiction"][i % 3], "idx": i}
            for i in range(12)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "validation.jsonl", rows[:3])
    (tmp_path / "test.jsonl").write_text(json.dumps(rows[4]) + "\n\n" + json.dumps(rows[5]) + "\n", encoding="utf-8")
    task = load_task(str(tmp_path), None)
    assert task.pair and task.label_names == ["contradiction", "entailment", "neutral"]
    assert task.splits["train"][1] == Example("p 1", "h 1", "neutral", id=f"{tmp_path / 'train.jsonl'}:2")
    assert [len(task.splits[s]) for s in ("train", "validation", "test")] == [12, 3, 2]
    assert not task.info["validation_carved_from_train"]


def test_csv_question_sentence_pairs_and_tsv(tmp_path):
    write_csv(tmp_path / "train.csv", ["question", "sentence", "label"],
              [("What is it?", "It is a thing.", "entailment"), ("Who?", "Nobody knows.", "not_entailment")] * 5)
    write_csv(tmp_path / "test.csv", ["question", "sentence", "label"], [("Why?", "Because.", "entailment")])
    (tmp_path / "validation.tsv").write_text('question\tsentence\tlabel\n"Quoted" q?\tan "odd" one\tnot_entailment\n',
                                             encoding="utf-8")
    task = load_task(str(tmp_path), None)
    assert task.pair and task.label_names == ["entailment", "not_entailment"]
    assert task.splits["validation"][0].text == '"Quoted" q?' and task.splits["validation"][0].text_pair == 'an "odd" one'
    assert task.splits["test"][0].text_pair == "Because."


@pytest.mark.parametrize("case, message", [
    ("no_test", "no test file"),
    ("no_label", r"missing column\(s\) \['label'\]"),
    ("no_text", "no text column"),
    ("header_only", "no examples"),
    ("empty_file", "empty file"),
    ("bad_json", "line 2: not valid JSON"),
    ("not_object", "expected a JSON object"),
    ("binary", "unreadable"),
    ("two_files", "more than one train file"),
    ("missing_text", "row 2: empty 'sentence'"),
    ("float_label", "not a class"),
    ("test_columns", r"test.csv: missing column\(s\) \['sentence1', 'sentence2'\]"),
])
def test_folder_errors(tmp_path, case, message):
    train = [("a sentence", "pos"), ("another one", "neg")] * 3
    write_csv(tmp_path / "train.csv", ["sentence", "label"], train)
    write_csv(tmp_path / "test.csv", ["sentence", "label"], train[:2])
    if case == "no_test":
        (tmp_path / "test.csv").unlink()
    elif case == "no_label":
        write_csv(tmp_path / "test.csv", ["sentence", "gold"], train[:2])
    elif case == "no_text":
        write_csv(tmp_path / "train.csv", ["content", "label"], train)
    elif case == "header_only":
        write_csv(tmp_path / "test.csv", ["sentence", "label"], [])
    elif case == "empty_file":
        (tmp_path / "test.csv").write_text("")
    elif case == "bad_json":
        (tmp_path / "test.csv").unlink()
        (tmp_path / "test.jsonl").write_text('{"sentence": "x", "label": "pos"}\n{"sentence": oops}\n')
    elif case == "not_object":
        (tmp_path / "test.csv").unlink()
        (tmp_path / "test.jsonl").write_text('["sentence", "label"]\n')
    elif case == "binary":
        (tmp_path / "test.csv").write_bytes(b"sentence,label\n\xff\xfe\xfa bad,pos\n")
    elif case == "two_files":
        write_jsonl(tmp_path / "train.jsonl", [{"sentence": "x", "label": "pos"}])
    elif case == "missing_text":
        write_csv(tmp_path / "train.csv", ["sentence", "label"], [("ok", "pos"), ("", "neg")])
    elif case == "float_label":
        write_csv(tmp_path / "train.csv", ["sentence", "label"], [("ok", 0.5), ("fine", 1.5)])
    elif case == "test_columns":
        write_csv(tmp_path / "train.csv", ["sentence1", "sentence2", "label"], [("a", "b", "pos"), ("c", "d", "neg")] * 3)
    with pytest.raises(TaskError, match=message):
        load_task(str(tmp_path), None)


def test_jsonl_label_types():
    from lmforge.finetuning.tasks.base import label_name

    assert [label_name(v, "x") for v in (0, 2, 1.0, True, " yes ", "1.0", "-1")] == ["0", "2", "1", "true", "yes", "1", "-1"]
    for bad in (None, float("nan"), "", 0.5, "0.5", [1]):
        with pytest.raises(TaskError):
            label_name(bad, "x")


def test_carving_keeps_identical_texts_together():
    train = [Example(f"text {i % 7}", None, "a" if i % 2 else "b") for i in range(70)]
    rest, held = carve_validation(train)
    assert held and rest and len(rest) + len(held) == 70
    assert not {e.text for e in rest} & {e.text for e in held}
    with pytest.raises(TaskError):
        carve_validation(train[:1])


# ----------------------------------------------------------------------------- Hugging Face


def test_parse_hf_spec():
    assert parse_hf_spec("hf:glue/sst2") == ("glue", "sst2")
    assert parse_hf_spec("hf:imdb") == ("imdb", None)
    assert parse_hf_spec("hf:nyu-mll/glue/mrpc") == ("nyu-mll/glue", "mrpc")
    assert parse_hf_spec("hf:stanfordnlp/imdb?config=plain_text") == ("stanfordnlp/imdb", "plain_text")
    with pytest.raises(TaskError):
        parse_hf_spec("hf:")
    with pytest.raises(TaskError):
        parse_hf_spec("hf:a/b?split=train")


def test_hf_without_datasets_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(TaskError, match=r"pip install 'lmforge\[hf\]'"):
        load_task("hf:glue/sst2", None)


def test_hf_glue_layout_maps_class_labels_and_moves_validation_to_test():
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["negative", "positive"]),
                                  "idx": datasets.Value("int32")})

    def ds(n, labels):
        return datasets.Dataset.from_dict({"sentence": [f"s {i}" for i in range(n)], "label": labels, "idx": list(range(n))},
                                          features=features)

    dd = datasets.DatasetDict({"train": ds(20, [i % 2 for i in range(20)]), "validation": ds(6, [1, 0, 1, 1, 0, 1]),
                               "test": ds(4, [-1] * 4)})
    task = task_from_hf(dd, name="glue/sst2", source="hf:glue/sst2")
    assert task.label_names == ["negative", "positive"] and task.prefix == "sst2" and not task.pair
    assert [e.label for e in task.splits["test"]] == ["positive", "negative", "positive", "positive", "negative", "positive"]
    assert len(task.splits["validation"]) == 2 and len(task.splits["train"]) == 18
    assert task.info["test_from_validation"] and task.info["validation_carved_from_train"]
    assert task.info["unlabelled_rows_dropped"]["test"] == 4


def test_hf_pairs_with_suffixed_validation_and_plain_int_labels():
    datasets = pytest.importorskip("datasets")

    def ds(n):
        return datasets.Dataset.from_dict({"premise": [f"p{i}" for i in range(n)], "hypothesis": [f"h{i}" for i in range(n)],
                                           "label": [i % 3 for i in range(n)]})

    dd = datasets.DatasetDict({"train": ds(12), "validation_matched": ds(6), "validation_mismatched": ds(5), "test_matched": ds(3)})
    task = task_from_hf(dd, name="multi_nli")
    assert task.pair and task.label_names == ["0", "1", "2"]
    assert len(task.splits["validation"]) == 6 and len(task.splits["test"]) == 3  # *_matched picked
    assert task.splits["train"][0] == Example("p0", "h0", "0", id="multi_nli:train:1")
    with pytest.raises(TaskError, match="no text column"):
        task_from_hf(datasets.DatasetDict({"train": datasets.Dataset.from_dict({"x": ["a"], "label": [0]})}), name="bad")


def test_task_validation_rejects_empty_splits_and_unknown_labels():
    from lmforge.finetuning.tasks import check_task

    ex = [Example("a", None, "x"), Example("b", None, "y")]
    task = Task("t", "", ["x", "y"], False, {"train": ex, "validation": ex, "test": []}, "t")
    with pytest.raises(TaskError, match="test split is empty"):
        check_task(task)
    task.splits["test"] = [Example("c", None, "z")]
    with pytest.raises(TaskError, match="'z'"):
        check_task(task)


def test_a_class_documents_own_lines_are_its_only_class_paragraphs(tmp_path):
    """A class document holds its methods' docstrings after its own: with ``own_lines`` in the
    metadata, only the class's own paragraphs are labelled "class"."""
    from lmforge.corpus.stdlib import line_key

    own = "The widget keeps a count of the things it has seen so far today."
    method = "Return the number of things the widget has seen since it was made."
    docs = docstring_documents(60)
    docs = [d for d in docs if json.loads(d[2]).get("docstring_of") != "class"]
    for i in range(30):
        meta = {"module": f"m{i}", "docstring_of": "class", "own_lines": [line_key(f"  {own}  ")]}
        docs.append((f"stdlib:m{i}:Widget{i}", f"{own}\n{method}", json.dumps(meta)))
    write_docs(tmp_path / "clean", docs)
    task = load_task(DEFAULT_TASK, params_at(tmp_path), max_train=None, max_eval=None)
    classes = [e for ex in task.splits.values() for e in ex if e.label == "class"]
    assert len(classes) == 30 and {e.text for e in classes} == {own}
    assert not any(e.text == method for ex in task.splits.values() for e in ex)


def test_the_stdlib_corpus_names_a_class_docstrings_own_lines():
    import ast

    from lmforge.corpus.stdlib import _documents_in, line_key

    tree = ast.parse('class Widget:\n    """Counts things.\n\n    Second paragraph."""\n\n'
                     '    def seen(self):\n        """Return the count."""\n')
    [(doc_id, text, kind, extra)] = list(_documents_in(tree, "m"))
    assert kind == "class" and text.split("\n")[-1] == "Return the count."
    assert set(extra["own_lines"]) == {line_key("Counts things."), line_key("Second paragraph.")}


# ----------------------------------------------------------------------------- docstring_package


def _package_docs(n: int) -> list[tuple[str, str, str]]:
    """n documents per source: the stdlib's and two packages' (one with a sub-module), each with a
    paragraph naming its subject and a short line the min_words filter drops."""
    subjects = {"stdlib": "the standard library reads files and sockets",
                "numpy": "numpy arrays hold numbers of one dtype in a grid",
                "networkx": "networkx graphs hold nodes joined by weighted edges"}
    docs = []
    for source, subject in subjects.items():
        for i in range(n):
            module = f"{source}.sub{i % 3}" if source != "stdlib" else f"mod{i}"
            prefix = "stdlib" if source == "stdlib" else "site-packages"
            meta = {"module": module, "docstring_of": "function"}
            docs.append((f"{prefix}:{module}:f{i}", f"Here {subject} for case {i}.\n{SHORT_LINE}", json.dumps(meta)))
    docs.append(("site-packages:numpy:orphan", "A document without docstring metadata but words enough here.", "{}"))
    return docs


def test_docstring_package_labels_each_paragraph_with_its_documents_package(tmp_path):
    from lmforge.finetuning.tasks import PACKAGE_TASK

    write_docs(tmp_path / "clean", _package_docs(40))
    params = params_at(tmp_path)
    task = load_task(PACKAGE_TASK, params, max_train=None, max_eval=None)
    assert task.name == PACKAGE_TASK and task.label_names == ["networkx", "numpy", "stdlib"]
    examples = [e for ex in task.splits.values() for e in ex]
    assert len(examples) == 120  # one paragraph per document; the short lines and the unlabelled one are left out
    for split, ex in task.splits.items():
        for e in ex:
            doc_id = e.id.split("#")[0]
            assert split_of(doc_id, params.split) == split
            assert e.label == ("stdlib" if doc_id.startswith("stdlib:") else doc_id.split(":")[1].split(".")[0])
            assert e.label in e.text or (e.label == "stdlib" and "standard library" in e.text)
    assert task.info["documents_per_label"] == {"networkx": 40, "numpy": 40, "stdlib": 40}


def test_docstring_package_needs_a_package_beside_the_stdlib(tmp_path):
    from lmforge.finetuning.tasks import PACKAGE_TASK

    stdlib_only = [d for d in _package_docs(40) if d[0].startswith("stdlib:")]
    write_docs(tmp_path / "clean", stdlib_only)
    with pytest.raises(TaskError, match="clean.include_site_packages") as info:
        load_task(PACKAGE_TASK, params_at(tmp_path))
    assert "\n" not in str(info.value)
    with pytest.raises(TaskError, match="lmforge clean"):
        load_task(PACKAGE_TASK, params_at(tmp_path, clean=tmp_path / "none"))
