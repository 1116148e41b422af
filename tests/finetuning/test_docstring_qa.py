"""The span-QA task docstring_qa (a signature with one parameter blanked, the blanked name's
mentions in the docstring as the answers) and the sliding-window word-overlap baseline."""

import ast
import json

import pytest

from lmforge.corpus.stdlib import _documents_in
from lmforge.finetuning.span_qa.baselines import best_window, question_words, sliding_window_baseline, window_words
from lmforge.finetuning.tasks import CORPUS_TASKS, QA_TASK, Answer, SpanQuestion, Task, TaskError, load_task
from lmforge.finetuning.tasks.docstring_qa import blank_parameter, cut_context, mentions
from lmforge.splits import split_of

from .conftest import docstring_documents, params_at, write_docs

SOURCE = '''
"""The module of helpers for files and stores."""

def copy(src, /, dst, *more, follow=True, **options):
    """Copy the file src to dst, with more files after it.

    When follow is false, links are copied as links; options go to the opener."""

def find(path, x, *, limit=None, key=None):
    """Search the paths under *path* for x, at most limit of them, Path or not."""

def mode(mode):
    """Return the mode of the file that the name mode describes."""

def tiny(value):
    """Return value."""

class Store:
    """Keeps a value for each key in a store."""

    def put(self, key, value, *, timeout=None):
        """Put value under key, waiting at most timeout seconds for the lock."""

    def get(self, key, default=None):
        """Return the value under key, or default when the store lacks key."""
'''

MODULES = 40
COPY = ("Copy the file src to dst, with more files after it. When follow is false, links are copied as links; "
        "options go to the opener.")
FIND = "Search the paths under *path* for x, at most limit of them, Path or not."
PUT = "Put value under key, waiting at most timeout seconds for the lock."
GET = "Return the value under key, or default when the store lacks key."


def _qa_docs(modules=MODULES):
    """The clean corpus's rows for SOURCE as modules m0, m1, ...: text and metadata from the syntax tree."""
    docs = []
    for i in range(modules):
        for doc_id, text, kind, extra in _documents_in(ast.parse(SOURCE), f"m{i}"):
            docs.append((doc_id, text, json.dumps({"module": f"m{i}", "docstring_of": kind, **extra})))
    return docs


@pytest.fixture(scope="module")
def qa(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa")
    write_docs(root / "clean", _qa_docs())
    params = params_at(root)
    return params, load_task(QA_TASK, params, max_train=None, max_eval=None)


def _by_id(task):
    return {q.id: (split, q) for split, qs in task.splits.items() for q in qs}


def test_a_parameter_is_blanked_in_its_signature():
    sig = "copy(src, /, dst, *more, follow=..., **options)"
    assert blank_parameter(sig, "src") == "copy(___, /, dst, *more, follow=..., **options)"
    assert blank_parameter(sig, "more") == "copy(src, /, dst, *___, follow=..., **options)"
    assert blank_parameter(sig, "follow") == "copy(src, /, dst, *more, ___=..., **options)"
    assert blank_parameter(sig, "options") == "copy(src, /, dst, *more, follow=..., **___)"
    assert blank_parameter("Store.put(key, value, *, timeout=...)", "value") == "Store.put(key, ___, *, timeout=...)"
    with pytest.raises(ValueError, match="'mor'"):
        blank_parameter(sig, "mor")
    with pytest.raises(ValueError):
        blank_parameter("f()", "f")


def test_mentions_are_whole_words_case_sensitive():
    # path, *path* and self.path count; paths, Path, _path and path_x do not
    assert mentions("path", "path, *path* paths self.path Path _path path_x") == [0, 7, 24]
    assert mentions("a.b", "a.b axb") == [0]  # the name is matched literally
    assert mentions("key", "") == []


def test_a_context_is_cut_at_a_word_boundary():
    assert cut_context(COPY, 40) == "Copy the file src to dst, with more"  # "files" would end at 41
    assert cut_context(COPY, 41) == "Copy the file src to dst, with more files"
    assert cut_context("short", 40) == "short"
    assert cut_context("x" * 50, 16) == "x" * 16


def test_questions_and_answers_of_a_function(qa):
    _, task = qa
    assert task.family == "span_qa" and task.label_names == [] and not task.pair and task.prefix == "question"
    assert QA_TASK == "docstring_qa" and QA_TASK in CORPUS_TASKS
    questions = _by_id(task)
    got = {qid.split("#")[1]: q for qid, (_, q) in questions.items() if qid.startswith("stdlib:m0:copy#")}
    assert sorted(got) == ["copy/dst", "copy/follow", "copy/more", "copy/options", "copy/src"]
    assert got["copy/dst"] == SpanQuestion(
        "Which parameter is ___ in copy(src, /, ___, *more, follow=..., **options)?", COPY,
        (Answer("dst", 21),), id="stdlib:m0:copy#copy/dst")
    assert got["copy/more"].question == "Which parameter is ___ in copy(src, /, dst, *___, follow=..., **options)?"
    assert {k: q.answers for k, q in got.items()} == {
        "copy/src": (Answer("src", 14),), "copy/dst": (Answer("dst", 21),), "copy/more": (Answer("more", 31),),
        "copy/follow": (Answer("follow", 57),), "copy/options": (Answer("options", 101),)}
    # x is a single character, key is not in the docstring ("Path" and "paths" are not "path")
    got = {qid: q for qid, (_, q) in questions.items() if qid.startswith("stdlib:m0:find#")}
    assert got == {
        "stdlib:m0:find#find/path": SpanQuestion("Which parameter is ___ in find(___, x, *, limit=..., key=...)?", FIND,
                                                 (Answer("path", 24),), id="stdlib:m0:find#find/path"),
        "stdlib:m0:find#find/limit": SpanQuestion("Which parameter is ___ in find(path, x, *, ___=..., key=...)?",
                                                  FIND, (Answer("limit", 45),), id="stdlib:m0:find#find/limit")}
    # mode(mode): the question would name its answer; tiny: "Return value." is under min_words
    assert not any(qid.startswith(("stdlib:m0:mode#", "stdlib:m0:tiny#")) for qid in questions)


def test_questions_and_answers_of_methods(qa):
    _, task = qa
    got = {qid.split("#")[1]: q for qid, (_, q) in _by_id(task).items() if qid.startswith("stdlib:m0:Store#")}
    assert sorted(got) == ["Store.get/default", "Store.get/key", "Store.put/key", "Store.put/timeout",
                           "Store.put/value"]
    assert got["Store.put/key"].question == "Which parameter is ___ in Store.put(___, value, *, timeout=...)?"
    assert got["Store.get/default"].question == "Which parameter is ___ in Store.get(key, ___=...)?"
    # each method's own docstring is its context, the class's own line ("Keeps ...") in neither
    assert {q.context for k, q in got.items() if k.startswith("Store.put")} == {PUT}
    assert {q.context for k, q in got.items() if k.startswith("Store.get")} == {GET}
    assert got["Store.put/key"].answers == (Answer("key", 16),)
    assert got["Store.put/value"].answers == (Answer("value", 4),)
    assert got["Store.put/timeout"].answers == (Answer("timeout", 37),)
    assert got["Store.get/key"].answers == (Answer("key", 23), Answer("key", 60))  # every mention, in order
    assert got["Store.get/default"].answers == (Answer("default", 31),)


def test_questions_are_split_by_document(qa):
    params, task = qa
    seen = {}
    for split, questions in task.splits.items():
        assert questions, split
        for q in questions:
            doc_id = q.id.split("#")[0]
            assert split_of(doc_id, params.split) == split
            assert seen.setdefault(doc_id, split) == split
    assert len(seen) == 3 * MODULES  # copy, find and Store of every module
    assert sum(task.info["questions"].values()) == 12 * MODULES
    assert task.info["questions_from"] == {"function": 7 * MODULES, "method": 5 * MODULES}
    assert task.info["skipped"] == {"short_contexts": MODULES, "single_character_parameters": MODULES,
                                    "parameters_not_in_context": MODULES, "answer_in_question": MODULES}
    assert sum(task.info["answers"].values()) == 13 * MODULES


def test_max_chars_cuts_the_context_and_drops_answers_past_the_cut(tmp_path):
    write_docs(tmp_path / "clean", _qa_docs())
    task = load_task(QA_TASK, params_at(tmp_path), max_train=None, max_eval=None, max_chars=40)
    got = {qid.split("#")[1]: q for qid, (_, q) in _by_id(task).items() if qid.startswith("stdlib:m0:copy#")}
    assert sorted(got) == ["copy/dst", "copy/more", "copy/src"]  # follow and options were past character 40
    assert {q.context for q in got.values()} == {"Copy the file src to dst, with more"}


def test_a_corpus_without_signatures_is_an_error(tmp_path):
    write_docs(tmp_path / "clean", docstring_documents(90))  # docstring_of, but no signature metadata
    with pytest.raises(TaskError, match="re-run `lmforge clean`") as info:
        load_task(QA_TASK, params_at(tmp_path))
    assert "signatures" in str(info.value)


def test_bad_signature_metadata_names_the_document(tmp_path):
    docs = _qa_docs(10)
    docs.append(("stdlib:bad:f", "Some words enough to make a context of this line.",
                 json.dumps({"module": "bad", "docstring_of": "function", "signature": ["f(a)"]})))
    write_docs(tmp_path / "clean", docs)
    with pytest.raises(TaskError, match="stdlib:bad:f"):
        load_task(QA_TASK, params_at(tmp_path))


# ----------------------------------------------------------------------------- the baseline


def _question(question, context, *answers):
    return SpanQuestion(question, context, tuple(Answer(a, context.index(a)) for a in answers))


def _hand_task():
    train = [_question("Capital of France?", "Paris is the capital.", "Paris"),
             _question("Biggest city?", "New York City is big.", "New York City"),
             _question("Which river?", "London has the Thames.", "the Thames")]
    test = [
        # windows of 2: "Thames river" has two question words -> EM 0, F1 2/3 against "The Thames"
        _question("Where does the river Thames flow?", "The Thames river flows through London to the sea.",
                  "The Thames"),
        # "Hamlet was" is the only window with a question word; the second gold answer matches -> EM 1, F1 1
        _question("Who wrote Hamlet?", "Hamlet was written by Shakespeare around 1600.", "Shakespeare",
                  "Hamlet was"),
        # no question word in the context: the first window, "It happened" -> 0, 0
        _question("What year?", "It happened in 1066, long ago.", "1066"),
        # "The sky" and "the sea" tie at one word: the earliest wins -> 0, 0 (the last tie, "sea is", would score F1 2/3)
        _question("Which color is the sky or the sea?", "The sky is blue and the sea is green.", "the sea"),
    ]
    return Task(name="hand", description="", label_names=[], pair=False, prefix="question",
                splits={"train": train, "validation": test[:1], "test": test}, family="span_qa")


def test_the_sliding_window_baseline_by_hand():
    task = _hand_task()
    assert window_words(task) == 2  # answers of 1, 3 and 2 words
    assert question_words("Where does the river Thames flow? ___") == {"river", "thames", "flow"}
    assert [best_window(q.question, q.context, 2) for q in task.splits["test"]] == [
        "Thames river", "Hamlet was", "It happened", "The sky"]
    result = sliding_window_baseline(task)
    assert result["exact_match"] == pytest.approx(1 / 4)
    assert result["f1"] == pytest.approx((2 / 3 + 1) / 4)
    assert result["split"] == "test" and result["examples"] == 4 and result["window_words"] == 2
    assert sliding_window_baseline(task, "validation")["f1"] == pytest.approx(2 / 3)


def test_the_window_is_the_lower_median_answer_length_and_at_least_one_word():
    def task_with(*answers):
        train = [_question("q?", f"Here: {a} end", a) for a in answers]
        return Task(name="w", description="", label_names=[], pair=False, prefix="question",
                    splits={"train": train, "validation": train, "test": train}, family="span_qa")

    assert window_words(task_with("one", "two", "three four five", "six seven eight")) == 1  # 1, 1, 3, 3 words
    assert window_words(task_with("...", "?!", "one two")) == 1  # 0, 0, 2 words: at least 1


def test_a_window_keeps_the_contexts_own_text():
    assert best_window("thames river", "See the Thames-river, now.", 2) == "Thames-river"
    assert best_window("anything", "Hi", 3) == "Hi"  # fewer words than w: all of them
    assert best_window("anything", "...", 1) == ""
    with pytest.raises(ValueError):
        best_window("q", "c", 0)


def test_the_baseline_refuses_other_families_and_splits():
    with pytest.raises(ValueError, match="not span_qa"):
        sliding_window_baseline(Task(name="c", description="", label_names=["a", "b"], pair=False, splits={},
                                     prefix="c"))
    with pytest.raises(ValueError, match="unknown split"):
        sliding_window_baseline(_hand_task(), "dev")


def test_the_baseline_on_the_docstring_task_lands_on_the_shown_names(qa):
    _, task = qa
    result = sliding_window_baseline(task)
    assert result["window_words"] == 1
    # the only context words the question shares are the function's and the other parameters' names
    assert result["exact_match"] == 0.0
