"""Generation tasks: folders of the public datasets' files (CNN/DailyMail JSONL, XSum CSV, WMT
translation JSONL, closed-book QA, generic source/target), each malformed file refused naming
the file and line; load_task's dispatch and headline metric per kind; the corpus task
docstring_summary; the lead-sentence and copy-input baselines against hand-computed scores."""

from __future__ import annotations

import csv
import json

import pytest

from lmforge.corpus.stdlib import line_key
from lmforge.finetuning.generation.baselines import copy_input_baseline, lead_sentence, lead_sentence_baseline
from lmforge.finetuning.tasks import CORPUS_TASKS, SUMMARY_TASK, Example, Task, TaskError, TextPair, load_task
from lmforge.finetuning.tasks.docstring_summary import (docstring_lines, docstring_summary_task, split_sentences,
                                                        summary_pair)
from lmforge.finetuning.tasks.generation_files import generation_folder_task, is_generation_folder
from lmforge.finetuning.tasks.glue import task_metric
from lmforge.splits import split_of

from .conftest import params_at, write_docs


def write_jsonl(path, rows, blank_after_first=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in rows]
    if blank_after_first:
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_csv(path, header, rows, delimiter=","):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def cnn_rows(n, split):
    return [{"article": f"({split}) Story {i}. The mayor of town {i} opened a bridge on Monday. Crowds came.",
             "highlights": f"Mayor opens bridge {i} .\nCrowds came .", "id": f"{split}{i:04x}"} for i in range(n)]


def cnn_folder(root, name="cnn_dailymail"):
    d = root / name
    write_jsonl(d / "train.jsonl", cnn_rows(6, "train"), blank_after_first=True)
    write_jsonl(d / "validation.jsonl", cnn_rows(2, "validation"))
    write_jsonl(d / "test.jsonl", cnn_rows(3, "test"))
    return d


def xsum_folder(root, name="xsum"):
    d = root / name
    rows = [[f"Document {i} says\na storm hit the coast {i} times.", f"Storm {i} hits coast.", str(i)] for i in range(8)]
    write_csv(d / "train.csv", ["document", "summary", "id"], rows)
    write_csv(d / "test.csv", ["document", "summary", "id"], rows[:3])
    return d


def wmt_rows(n, keys=("de", "en")):
    texts = {"de": "Das Haus {i} ist gross.", "en": "The house {i} is big.", "fr": "La maison {i} est grande."}
    return [{"translation": {k: texts[k].format(i=i) for k in keys}} for i in range(n)]


def wmt_folder(root, name, keys=("de", "en")):
    d = root / name
    write_jsonl(d / "train.jsonl", wmt_rows(6, keys))
    write_jsonl(d / "test.jsonl", wmt_rows(2, keys))
    return d


# --- folders of each kind ---------------------------------------------------------------------

def test_a_cnn_dailymail_folder_is_a_summarization_task(tmp_path):
    d = cnn_folder(tmp_path)
    task = generation_folder_task(d)
    assert task.family == "generation" and task.label_names == [] and task.pair is False
    assert task.name == "cnn_dailymail" and task.prefix == "summarize"
    assert task.info["generation_kind"] == "summarization" and task.info["columns"] == ["article", "highlights"]
    assert [len(task.splits[s]) for s in ("train", "validation", "test")] == [6, 2, 3]
    first, second = task.splits["train"][:2]
    assert first == TextPair(cnn_rows(1, "train")[0]["article"], "Mayor opens bridge 0 .\nCrowds came .",
                             id=f"{d / 'train.jsonl'}:1")
    assert second.id == f"{d / 'train.jsonl'}:3"  # line 2 is blank: ids are file lines
    assert task.info["validation_carved_from_train"] is False


def test_an_xsum_csv_folder_carves_validation_and_numbers_multiline_rows_by_their_first_line(tmp_path):
    d = xsum_folder(tmp_path)
    task = generation_folder_task(d)
    assert task.info["generation_kind"] == "summarization" and task.info["columns"] == ["document", "summary"]
    assert task.info["validation_carved_from_train"] is True
    assert len(task.splits["train"]) + len(task.splits["validation"]) == 8 and task.splits["validation"]
    test = task.splits["test"]
    assert [p.id for p in test] == [f"{d / 'test.csv'}:{n}" for n in (2, 4, 6)]  # each row spans two lines
    assert test[1].source == "Document 1 says\na storm hit the coast 1 times." and test[1].target == "Storm 1 hits coast."


@pytest.mark.parametrize("name, source, target, prefix", [
    ("wmt16-de-en", "de", "en", "translate German to English"),
    ("en-de", "en", "de", "translate English to German"),
    ("wmt16_en_de", "en", "de", "translate English to German"),
])
def test_a_translation_folder_reads_its_direction_from_the_folder_name(tmp_path, name, source, target, prefix):
    task = generation_folder_task(wmt_folder(tmp_path, name))
    assert task.info["generation_kind"] == "translation" and task.prefix == prefix
    assert task.info["languages"]["source"] == source and task.info["languages"]["target"] == target
    assert "folder name" in task.info["languages"]["from"]
    pair = task.splits["test"][1]
    texts = wmt_rows(2)[1]["translation"]
    assert (pair.source, pair.target) == (texts[source], texts[target])


def test_a_translation_folder_without_a_direction_in_its_name_takes_the_first_key_as_source(tmp_path):
    task = generation_folder_task(wmt_folder(tmp_path, "news", keys=("en", "de")))
    assert task.info["languages"] == {"source": "en", "target": "de", "from": "the first row's key order"}
    assert task.prefix == "translate English to German"
    assert task.splits["test"][0] == TextPair("The house 0 is big.", "Das Haus 0 ist gross.",
                                              id=f"{tmp_path / 'news' / 'test.jsonl'}:1")


def test_an_ambiguous_translation_direction_is_refused(tmp_path):
    with pytest.raises(TaskError, match=r"says ro-en but the file's languages are \['de', 'en'\]"):
        generation_folder_task(wmt_folder(tmp_path, "wmt16-ro-en"))
    three = wmt_folder(tmp_path, "multi", keys=("de", "en", "fr"))
    with pytest.raises(TaskError, match=rf"{three / 'train.jsonl'}:1: 'translation' must map exactly two"):
        generation_folder_task(three)
    d = wmt_folder(tmp_path, "de-en")
    write_jsonl(d / "test.jsonl", wmt_rows(2) + wmt_rows(1, keys=("fr", "en")))
    with pytest.raises(TaskError, match=rf"{d / 'test.jsonl'}:3: 'translation' has languages \['en', 'fr'\]"):
        generation_folder_task(d)


def test_a_closed_book_qa_folder_keeps_the_first_of_several_answers(tmp_path):
    d = tmp_path / "nq_open"
    rows = [{"question": f"who wrote book {i}", "answer": [f"author {i}", f"writer {i}"] if i % 2 else [f"author {i}"]}
            for i in range(6)]
    write_jsonl(d / "train.jsonl", rows)
    write_jsonl(d / "test.jsonl", [{"question": "when was it built", "answer": 1889},
                                   {"question": "who built it", "answer": {"text": ["Eiffel", "Gustave Eiffel"]}}])
    task = generation_folder_task(d)
    assert task.info["generation_kind"] == "qa" and task.prefix == "question"
    assert [(p.source, p.target) for p in task.splits["test"]] == [("when was it built", "1889"),
                                                                    ("who built it", "Eiffel")]
    assert task.info["rows_with_several_answers"] == {"train": 3, "test": 1}
    every = {p.source: p.target for s in task.splits.values() for p in s}
    assert every["who wrote book 3"] == "author 3"


def test_generic_source_target_and_tsv_input_output_are_text_tasks(tmp_path):
    d = tmp_path / "Code-Comments"
    write_jsonl(d / "train.jsonl", [{"source": f"x = {i}", "target": f"set x to {i}"} for i in range(5)])
    write_jsonl(d / "test.jsonl", [{"source": "y = 2", "target": "set y to 2"}])
    task = generation_folder_task(d)
    assert task.info["generation_kind"] == "text" and task.prefix == "code comments"
    d2 = tmp_path / "io"
    write_csv(d2 / "train.tsv", ["input", "output"], [[f"in {i}", f"out {i}"] for i in range(5)], delimiter="\t")
    write_csv(d2 / "dev.tsv", ["input", "output"], [["in a", "out a"]], delimiter="\t")
    write_csv(d2 / "test.tsv", ["input", "output"], [["in b", "out b"]], delimiter="\t")
    task2 = generation_folder_task(d2)
    assert task2.info["columns"] == ["input", "output"] and task2.splits["validation"] == [
        TextPair("in a", "out a", id=f"{d2 / 'dev.tsv'}:2")]


# --- malformed files: one TaskError naming the file and line ------------------------------------

def test_bad_json_names_the_file_and_line(tmp_path):
    d = cnn_folder(tmp_path)
    (d / "test.jsonl").write_text(json.dumps(cnn_rows(1, "t")[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(TaskError, match=rf"^{d / 'test.jsonl'}:2: not valid JSON"):
        generation_folder_task(d)


def test_a_missing_column_names_the_file_and_line(tmp_path):
    d = cnn_folder(tmp_path)
    write_jsonl(d / "validation.jsonl", cnn_rows(2, "v") + [{"article": "Only an article here."}])
    with pytest.raises(TaskError, match=rf"^{d / 'validation.jsonl'}:3: missing column\(s\) \['highlights'\]"):
        generation_folder_task(d)
    x = xsum_folder(tmp_path)
    write_csv(x / "test.csv", ["document", "id"], [["a document", "1"]])
    with pytest.raises(TaskError, match=rf"^{x / 'test.csv'}:1: missing column\(s\) \['summary'\]"):
        generation_folder_task(x)


def test_an_empty_target_names_the_file_and_line(tmp_path):
    d = cnn_folder(tmp_path)
    rows = cnn_rows(3, "train")
    rows[2]["highlights"] = "   "
    write_jsonl(d / "train.jsonl", rows)
    with pytest.raises(TaskError, match=rf"^{d / 'train.jsonl'}:3: empty 'highlights'"):
        generation_folder_task(d)
    x = xsum_folder(tmp_path)
    write_csv(x / "test.csv", ["document", "summary", "id"], [["two\nlines", "fine", "0"], ["a document", "", "1"]])
    with pytest.raises(TaskError, match=rf"^{x / 'test.csv'}:4: empty 'summary'"):
        generation_folder_task(x)


def test_a_csv_row_with_the_wrong_number_of_fields_names_the_file_and_line(tmp_path):
    x = xsum_folder(tmp_path)
    (x / "test.csv").write_text("document,summary\na doc,a sum\nonly one field\n", encoding="utf-8")
    with pytest.raises(TaskError, match=rf"^{x / 'test.csv'}:3: 1 fields, the header has 2"):
        generation_folder_task(x)


# --- dispatch and metrics -----------------------------------------------------------------------

def test_load_task_dispatches_generation_folders_and_picks_the_metric_by_kind(tmp_path):
    cases = {cnn_folder(tmp_path): "rougeL", xsum_folder(tmp_path): "rougeL",
             wmt_folder(tmp_path, "wmt16-de-en"): "bleu"}
    qa = tmp_path / "webq"
    write_csv(qa / "train.csv", ["question", "answer"], [[f"q {i}", f"a {i}"] for i in range(4)])
    write_csv(qa / "test.csv", ["question", "answer"], [["q x", "a x"]])
    cases[qa] = "exact_match"
    text = tmp_path / "pairs"
    write_jsonl(text / "train.jsonl", [{"input": f"i {i}", "output": f"o {i}"} for i in range(4)])
    write_jsonl(text / "test.jsonl", [{"input": "i", "output": "o"}])
    cases[text] = "rougeL"
    for folder, metric in cases.items():
        task = load_task(str(folder), max_train=3)
        assert task.family == "generation" and task.info["metric"] == metric, folder
        assert len(task.splits["train"]) <= 3


def test_other_families_columns_keep_a_folder_out_of_generation(tmp_path):
    d = tmp_path / "labelled"
    write_csv(d / "train.csv", ["text", "label"], [[f"text {i}", str(i % 2)] for i in range(6)])
    write_csv(d / "test.csv", ["text", "label"], [["t", "0"], ["u", "1"]])
    assert not is_generation_folder(d) and load_task(str(d)).family == "classification"
    for extra in ("label", "context", "tags", "score"):
        e = tmp_path / f"with_{extra}"
        write_jsonl(e / "train.jsonl", [{"article": "a b", "highlights": "a", extra: "x"}])
        assert not is_generation_folder(e), extra
    assert is_generation_folder(cnn_folder(tmp_path))
    # a translation column is read from JSONL only
    c = tmp_path / "csv_translation"
    write_csv(c / "train.csv", ["translation"], [["x"]])
    assert not is_generation_folder(c)


def test_task_metric_of_each_generation_kind():
    expected = {"summarization": "rougeL", "translation": "bleu", "qa": "exact_match", "text": "rougeL", None: "rougeL"}
    for kind, metric in expected.items():
        assert task_metric("any", [], family="generation", generation_kind=kind) == metric
    with pytest.raises(ValueError, match="unknown generation_kind 'poetry'"):
        task_metric("any", [], family="generation", generation_kind="poetry")
    assert task_metric("any", ["a", "b"], family="classification", generation_kind="qa") == "accuracy"


# --- sentences, the corpus task -----------------------------------------------------------------

def test_split_sentences_rule():
    assert split_sentences("Return x. Then y!  Why? Because.") == ["Return x.", "Then y!", "Why?", "Because."]
    assert split_sentences("Use e.g. foo, version 3.4 or x.y. Done") == ["Use e.g. foo, version 3.4 or x.y.", "Done"]
    assert split_sentences("e.g. The rule has no abbreviations.") == ["e.g.", "The rule has no abbreviations."]
    assert split_sentences("No end mark") == ["No end mark"] and split_sentences("  ") == []
    assert split_sentences("Ends here.\nÉcole starts.") == ["Ends here.", "École starts."]


FILLER = "this rest of the docstring has plenty of words so that the source is long enough to keep it here"


def summary_documents():
    """(id, text, metadata) of module, function and class docstrings; a class's methods follow its own lines."""
    docs = []
    for i in range(60):
        kind = ("module", "function", "class")[i % 3]
        own = [f"Summary of thing {i}. It does {i} things.", f"Details {i}: {FILLER}."]
        lines = list(own)
        meta = {"docstring_of": kind, "module": f"m{i}"}
        doc_id = {"module": f"stdlib:m{i}", "function": f"stdlib:m{i}:f{i}", "class": f"stdlib:m{i}:C{i}"}[kind]
        if kind == "class":
            lines += [f"Method docstring of C{i}. Not the class's own words at all."]
            meta["own_lines"] = sorted(line_key(x) for x in own)
        docs.append((doc_id, "\n".join(lines), json.dumps(meta)))
    docs.append(("stdlib:short", "Short summary. Too short a rest.", json.dumps({"docstring_of": "function"})))
    docs.append(("stdlib:m0:NoDoc", "Only a method's docstring here. " + FILLER,
                 json.dumps({"docstring_of": "class", "own_lines": []})))
    docs.append(("web:page", "Not a docstring. " + FILLER, "{}"))
    return docs


@pytest.fixture(scope="module")
def summary_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("summary")
    docs = summary_documents()
    write_docs(root / "clean", docs)
    return params_at(root), docs


def test_docstring_lines_and_pairs():
    own = [line_key("First. Second.")]
    assert docstring_lines("First.   Second.\n\nMethod doc.", "class", own) == ["First. Second."]
    assert docstring_lines("Method doc.\nFirst. Second.", "class", own) == []  # a class's own lines lead its document
    assert docstring_lines("a  b\n\nc", "function") == ["a b", "c"]
    assert summary_pair(["First sentence. Second one.", "Next paragraph."]) == ("Second one. Next paragraph.",
                                                                                 "First sentence.")
    assert summary_pair(["Only a summary."]) is None


def test_docstring_summary_from_the_clean_corpus(summary_corpus):
    params, docs = summary_corpus
    assert SUMMARY_TASK == "docstring_summary" and CORPUS_TASKS[SUMMARY_TASK] is docstring_summary_task
    task = load_task(SUMMARY_TASK, params, max_train=None, max_eval=None)
    assert task.family == "generation" and task.info["generation_kind"] == "summarization"
    assert task.info["metric"] == "rougeL" and task.label_names == []
    pairs = {p.id: (split, p) for split, ps in task.splits.items() for p in ps}
    assert set(pairs) == {d[0] for d in docs[:60]}  # not the short one, the class without its own docstring, the web page
    assert task.info["skipped"] == {"short_source": 1, "no_source": 1}
    for doc_id, (split, pair) in pairs.items():
        i = int(doc_id.split(":")[1][1:])
        assert split == split_of(doc_id, params.split)
        assert pair.target == f"Summary of thing {i}."
        assert pair.source == f"It does {i} things. Details {i}: {FILLER}."  # a class's methods left out


def test_docstring_summary_cuts_sources_and_needs_enough_words(summary_corpus):
    params, _ = summary_corpus
    task = docstring_summary_task(params, max_chars=40)
    assert all(len(p.source) <= 40 for s in task.splits.values() for p in s)
    m0 = next(p for ps in task.splits.values() for p in ps if p.id == "stdlib:m0")
    assert m0.source == "It does 0 things. Details 0: this rest"  # 38 characters: " of" would make 41
    with pytest.raises(TaskError, match="no docstring with a source of >= 200 words"):
        docstring_summary_task(params, min_source_words=200)
    # the source needs max(min_words, min_source_words) words: "Too short a rest." has 4, the others 26
    assert docstring_summary_task(params, min_words=4, min_source_words=1).info["skipped"] == {"no_source": 1}
    assert docstring_summary_task(params, min_words=1, min_source_words=5).info["skipped"]["short_source"] == 1
    with pytest.raises(TaskError, match="source of >= 27 words"):
        docstring_summary_task(params, min_words=27, min_source_words=1)
    assert docstring_summary_task(params, min_words=26, min_source_words=1).info["documents_kept"]


# --- baselines ----------------------------------------------------------------------------------

def generation_task(pairs, kind="summarization"):
    examples = [TextPair(s, t, id=str(i)) for i, (s, t) in enumerate(pairs)]
    return Task(name="tiny", description="", label_names=[], pair=False, prefix="summarize",
                splits={"train": examples, "validation": examples, "test": examples},
                info={"generation_kind": kind}, family="generation")


TINY = [("The cat sat. A dog ran far.", "the cat sat"), ("Blue sky today", "red sky")]


def test_lead_sentence_baseline_by_hand():
    assert lead_sentence("The cat sat. A dog ran far.") == "The cat sat." and lead_sentence(" Blue sky ") == "Blue sky"
    scores = lead_sentence_baseline(generation_task(TINY))
    # 1: "The cat sat." = the reference (R1 = R2 = RL = 1, exact match after normalisation);
    # 2: "Blue sky today" vs "red sky": 1 shared unigram, P 1/3, R 1/2, F 0.4; no shared bigram
    assert scores == pytest.approx({"rouge1": 0.7, "rouge2": 0.5, "rougeL": 0.7, "exact_match": 0.5,
                                    "split": "test", "examples": 2})


def test_copy_input_baseline_by_hand():
    scores = copy_input_baseline(generation_task(TINY), split="validation")
    # 1: 7 tokens against 3, all 3 shared: F1 = 2 * 3/7 * 1 / (3/7 + 1) = 0.6; bigrams 2 of 6: F = 0.5; LCS 3: 0.6
    assert scores == pytest.approx({"rouge1": 0.5, "rouge2": 0.25, "rougeL": 0.5, "exact_match": 0.0,
                                    "split": "validation", "examples": 2})


def test_baseline_metrics_follow_the_kind():
    same = [("the old house is big and red", "the old house is big and red")] * 2
    translation = copy_input_baseline(generation_task(same, "translation"))
    assert set(translation) == {"bleu", "chrf", "exact_match", "split", "examples"}
    assert translation["bleu"] == pytest.approx(1.0) and translation["exact_match"] == 1.0
    qa = lead_sentence_baseline(generation_task([("Paris. It is big.", "paris"), ("Rome", "Milan")], "qa"))
    assert qa == {"exact_match": 0.5, "split": "test", "examples": 2}
    classification = Task(name="c", description="", label_names=["a", "b"], pair=False, prefix="c",
                          splits={s: [Example("x", None, "a")] for s in ("train", "validation", "test")})
    with pytest.raises(ValueError, match="not a generation one"):
        copy_input_baseline(classification)
