"""The tagging task docstring_params: parameter names from the syntax tree, the word and tag rule,
and the task built from a clean corpus."""

import ast
import json

import pytest

from lmforge.corpus.stdlib import _documents_in, line_key
from lmforge.finetuning.tasks import CORPUS_TASKS, PARAMS_TASK, TaggedSentence, TaskError, load_task
from lmforge.finetuning.tasks.docstring_params import split_words, tag_words, taggable
from lmforge.splits import split_of

from .conftest import SHORT_LINE, docstring_documents, params_at, write_docs

SOURCE = '''
"""The module."""

def copy(src, /, dst, *more, follow=True, **options):
    """Copy *src* to *dst*.

    With follow false, links are copied as links."""

def bound(self, x):
    """A function that takes self."""

def _private(path):
    """Not a public function."""

def undocumented(path):
    pass

class Store:
    """Keeps things.

    Second paragraph of the class."""

    def put(self, key, value, *, timeout=None):
        """Put value under key.

        Waits at most timeout seconds."""

    @classmethod
    def load(cls, path):
        """Read a store from path."""

    def _hidden(self, key):
        """Not public."""
'''


def _documents():
    return {doc_id: (text, kind, extra) for doc_id, text, kind, extra in _documents_in(ast.parse(SOURCE), "m")}


def test_a_function_documents_parameters_come_from_its_signature():
    docs = _documents()
    assert set(docs) == {"stdlib:m", "stdlib:m:copy", "stdlib:m:bound", "stdlib:m:Store"}
    # positional-only, regular, *args, keyword-only, **kwargs, in signature order
    assert docs["stdlib:m:copy"][2]["parameters"] == ["src", "dst", "more", "follow", "options"]
    assert docs["stdlib:m:bound"][2]["parameters"] == ["x"]  # self left out
    assert docs["stdlib:m"][2] == {}


def test_a_class_document_maps_its_methods_lines_to_their_parameters():
    text, kind, extra = _documents()["stdlib:m:Store"]
    assert kind == "class"
    assert extra["own_lines"] == sorted({line_key("Keeps things."), line_key("Second paragraph of the class.")})
    assert extra["method_parameters"] == {
        line_key("Put value under key."): ["key", "value", "timeout"],
        line_key("Waits at most timeout seconds."): ["key", "value", "timeout"],
        line_key("Read a store from path."): ["path"],  # cls left out; _hidden is not in the document
    }
    assert text.split("\n")[-1] == "Read a store from path."


def test_a_line_two_methods_share_gets_both_methods_names():
    tree = ast.parse('class C:\n    def a(self, left):\n        """Same words."""\n'
                     '    def b(self, right, left):\n        """Same words."""\n')
    [(_, _, _, extra)] = list(_documents_in(tree, "m"))
    assert extra["method_parameters"] == {line_key("Same words."): ["left", "right"]}


def test_the_stdlib_corpus_records_real_parameters():
    import textwrap

    with open(textwrap.__file__, encoding="utf-8") as f:
        docs = {d[0]: d for d in _documents_in(ast.parse(f.read()), "textwrap")}
    assert docs["stdlib:textwrap:dedent"][3]["parameters"] == ["text"]
    assert docs["stdlib:textwrap:fill"][3]["parameters"] == ["text", "width", "kwargs"]
    wrapper = docs["stdlib:textwrap:TextWrapper"]
    wrap_line = next(line for line in wrapper[1].split("\n") if line.startswith("wrap(text : string) -> [string]"))
    assert wrapper[3]["method_parameters"][line_key(wrap_line)] == ["text"]


def test_words_split_punctuation_off_names():
    assert split_words("Copy *path* to (key, **kwargs) self.path_name: `text`.") == (
        "Copy", "*", "path", "*", "to", "(", "key", ",", "**", "kwargs", ")", "self", ".", "path_name", ":", "`",
        "text", "`.")
    assert split_words("  ") == ()


def test_a_word_is_tagged_when_it_is_a_parameter_name_of_two_characters_or_more():
    names = taggable(["self", "cls", "s", "a", "path", "kwargs", "_flag"])
    assert names == {"path", "kwargs", "_flag"}
    words = split_words("If a is set, self.path and *s* go to Path path kwargs _flag paths.")
    tags = tag_words(words, names)
    tagged = [w for w, t in zip(words, tags) if t == "B-PARAM"]
    assert tagged == ["path", "path", "kwargs", "_flag"]  # not "a", "s", "self", "Path" nor "paths"
    assert set(tags) == {"O", "B-PARAM"} and len(tags) == len(words)


# ----------------------------------------------------------------------------- the task


def _params_docs(n=60):
    """n function documents (one with only a single-character parameter), n class documents
    (their own paragraph, a method with parameters, a method with none), and module documents."""
    docs = []
    for i in range(n):
        meta = {"module": f"m{i}", "docstring_of": "function", "parameters": ["path", "mode", "s"]}
        text = (f"Open the file at path {i} in the given mode and return it now.\n"
                f"The result is cached for later calls of this function number {i}.\n{SHORT_LINE}")
        docs.append((f"stdlib:m{i}:open{i}", text, json.dumps(meta)))
        own = f"A store of things number {i} that keeps them in memory for a while."
        put = f"Put the value under key in the store number {i} and return the old value."
        clear = f"Clear the store number {i} of every key and value it keeps in memory."
        meta = {"module": f"m{i}", "docstring_of": "class", "own_lines": [line_key(own)],
                "method_parameters": {line_key(put): ["key", "value"], line_key(clear): []}}
        docs.append((f"stdlib:m{i}:Store{i}", f"{own}\n{put}\n{clear}", json.dumps(meta)))
        meta = {"module": f"m{i}", "docstring_of": "function", "parameters": ["x"]}
        docs.append((f"stdlib:m{i}:scale{i}", f"Scale the value x by the factor of the module number {i}.",
                     json.dumps(meta)))
        docs.append((f"stdlib:m{i}", f"The module number {i} holds the file path and mode helpers.",
                     json.dumps({"module": f"m{i}", "docstring_of": "module"})))
    return docs


def test_the_task_tags_function_and_method_paragraphs(tmp_path):
    assert PARAMS_TASK == "docstring_params" and PARAMS_TASK in CORPUS_TASKS
    write_docs(tmp_path / "clean", _params_docs())
    params = params_at(tmp_path)
    task = load_task(PARAMS_TASK, params, max_train=None, max_eval=None)
    assert task.family == "tagging" and task.label_names == ["O", "B-PARAM"] and task.prefix == "docstring params"
    sentences = [s for split in task.splits.values() for s in split]
    assert all(isinstance(s, TaggedSentence) for s in sentences)
    # two paragraphs per open*, one (the put method's) per Store*; scale* (only "x") and the
    # modules, the class's own paragraph, the parameterless method and the short lines are left out
    assert len(sentences) == 3 * 60
    by_kind = {"open": [], "Store": []}
    for split, ss in task.splits.items():
        for s in ss:
            doc_id = s.id.split("#")[0]
            assert split_of(doc_id, params.split) == split
            by_kind["open" if ":open" in doc_id else "Store"].append(s)
    for s in by_kind["open"]:
        tagged = [w for w, t in zip(s.words, s.tags) if t == "B-PARAM"]
        assert tagged == (["path", "mode"] if s.words[0] == "Open" else [])  # the second paragraph names none
    for s in by_kind["Store"]:
        assert s.words[0] == "Put"
        assert [w for w, t in zip(s.words, s.tags) if t == "B-PARAM"] == ["value", "key", "value"]
    assert task.info["sentences_from"] == {"function": 120, "class": 60}
    assert sum(task.info["sentences_with_a_parameter"].values()) == 120
    assert task.label_counts("train")["B-PARAM"] > 0


def test_a_corpus_cleaned_before_the_parameters_were_recorded_is_an_error(tmp_path):
    write_docs(tmp_path / "clean", docstring_documents(90))  # docstring_of, but no parameter metadata
    with pytest.raises(TaskError, match="re-run `lmforge clean`") as info:
        load_task(PARAMS_TASK, params_at(tmp_path))
    assert "parameter names" in str(info.value)


def test_bad_parameter_metadata_names_the_document(tmp_path):
    docs = _params_docs(20)
    docs.append(("stdlib:bad:f", "Some words enough to make a paragraph of this line.",
                 json.dumps({"module": "bad", "docstring_of": "function", "parameters": "path"})))
    write_docs(tmp_path / "clean", docs)
    with pytest.raises(TaskError, match="stdlib:bad:f"):
        load_task(PARAMS_TASK, params_at(tmp_path))
