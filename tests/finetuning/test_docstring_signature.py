"""The pair task docstring_signature: signatures from the syntax tree, and the (signature,
paragraph) pairs built from a clean corpus: balanced, deterministic, negatives from the same class
or module first and never from another split."""

import ast
import json
from collections import Counter

import pytest

from lmforge.corpus.stdlib import _documents_in, line_key, signature
from lmforge.finetuning.tasks import CORPUS_TASKS, SIGNATURE_TASK, Example, TaskError, load_task
from lmforge.finetuning.tasks.docstring_signature import docstring_signature_task, signature_parameters
from lmforge.splits import split_of

from .conftest import SHORT_LINE, docstring_documents, params_at, write_docs


def _sig(source):
    return signature(ast.parse(source).body[0])


def test_a_signature_shows_the_parameters_in_order_with_markers_and_elided_defaults():
    assert _sig("def copy(src, /, dst, *more, follow=True, **options): pass") == \
        "copy(src, /, dst, *more, follow=..., **options)"
    assert _sig("def put(self, key, value=None, *, timeout, retry=3): pass") == \
        "put(key, value=..., *, timeout, retry=...)"  # self left out, bare * before keyword-only
    assert _sig("def g(self, /, x=1): pass") == "g(x=...)"  # no / when only self was positional-only
    assert _sig("def h(a, b=1, /, c=2, *args): pass") == "h(a, b=..., /, c=..., *args)"
    assert _sig("async def k(cls): pass") == "k()"
    assert _sig("def f(x: int = 1, *a: str, **k: bool) -> None: pass") == "f(x=..., *a, **k)"  # no annotations


def test_signature_parameters_reads_the_names_back():
    assert signature_parameters("copy(src, /, dst, *more, follow=..., **options)") == \
        ["src", "dst", "more", "follow", "options"]
    assert signature_parameters("Store.put(key, value=..., *, timeout)") == ["key", "value", "timeout"]
    assert signature_parameters("k()") == []


SOURCE = '''
def copy(src, dst, *, follow=True):
    """Copy src to dst."""

class Store:
    """Keeps things."""

    def put(self, key, value):
        """Put value under key.

        Same words."""

    def take(self, key):
        """Same words."""

    def _hidden(self):
        """Not public."""
'''


def test_the_corpus_records_function_and_method_signatures():
    docs = {d[0]: d[3] for d in _documents_in(ast.parse(SOURCE), "m")}
    assert docs["stdlib:m:copy"]["signature"] == "copy(src, dst, *, follow=...)"
    assert docs["stdlib:m:Store"]["method_signatures"] == {
        line_key("Put value under key."): ["put(key, value)"],
        line_key("Same words."): ["put(key, value)", "take(key)"],  # a shared line: both methods'
    }
    assert docs["stdlib:m:Store"]["method_parameters"][line_key("Same words.")] == ["key", "value"]  # unchanged


def test_the_real_stdlib_corpus_records_signatures():
    import textwrap

    with open(textwrap.__file__, encoding="utf-8") as f:
        docs = {d[0]: d[3] for d in _documents_in(ast.parse(f.read()), "textwrap")}
    assert docs["stdlib:textwrap:fill"]["signature"] == "fill(text, width=..., **kwargs)"
    assert "wrap(text)" in {s for sigs in docs["stdlib:textwrap:TextWrapper"]["method_signatures"].values()
                            for s in sigs}


# ----------------------------------------------------------------------------- the task


def _signature_docs(n=40):
    """Per module i: two functions (open{i}: two paragraphs, close{i}: one), a class Store{i} (its
    own paragraph, put and get with a paragraph each, a line both share), a function tiny{i} with
    only a short line, a module document and a short line; every signature text distinct."""
    docs = []
    for i in range(n):
        opened = (f"Open the file at path {i} in the given mode and return it now.\n"
                  f"The result is cached for later calls of this function number {i}.\n{SHORT_LINE}")
        docs.append((f"stdlib:m{i}:open{i}", opened, json.dumps(
            {"module": f"m{i}", "docstring_of": "function", "parameters": ["path", "mode"],
             "signature": f"open{i}(path, mode=...)"})))
        docs.append((f"stdlib:m{i}:close{i}", f"Close the handle number {i} and flush what it still buffers.",
                     json.dumps({"module": f"m{i}", "docstring_of": "function", "parameters": ["handle"],
                                 "signature": f"close{i}(handle)"})))
        own = f"A store of things number {i} that keeps them in memory for a while."
        put = f"Put the value under key in the store number {i} and return the old value."
        get = f"Get the value under key from the store number {i} or the default when missing."
        shared = f"Both methods of store {i} share this very line of their two docstrings."
        meta = {"module": f"m{i}", "docstring_of": "class", "own_lines": [line_key(own)],
                "method_parameters": {line_key(put): ["key", "value"], line_key(get): ["key", "default"],
                                      line_key(shared): ["key", "value", "default"]},
                "method_signatures": {line_key(put): ["put(key, value)"], line_key(get): ["get(key, default=...)"],
                                      line_key(shared): ["put(key, value)", "get(key, default=...)"]}}
        docs.append((f"stdlib:m{i}:Store{i}", f"{own}\n{put}\n{get}\n{shared}", json.dumps(meta)))
        docs.append((f"stdlib:m{i}:tiny{i}", SHORT_LINE, json.dumps(  # no paragraph: never a negative either
            {"module": f"m{i}", "docstring_of": "function", "parameters": ["path"], "signature": f"tiny{i}(path)"})))
        docs.append((f"stdlib:m{i}", f"The module number {i} holds the file path and mode helpers.",
                     json.dumps({"module": f"m{i}", "docstring_of": "module"})))
    return docs


def _owner(text):
    """The document id a fake corpus's signature text is from."""
    name = text.split("(")[0]
    if "." in name:
        cls = name.split(".")[0]
        return f"stdlib:m{cls[len('Store'):]}:{cls}"
    i = name.lstrip("abcdefghijklmnopqrstuvwxyz")
    return f"stdlib:m{i}:{name}"


@pytest.fixture
def built(tmp_path):
    write_docs(tmp_path / "clean", _signature_docs())
    params = params_at(tmp_path)
    return params, load_task(SIGNATURE_TASK, params, max_train=None, max_eval=None)


def test_every_paragraph_gives_one_positive_and_one_negative(built):
    params, task = built
    assert SIGNATURE_TASK == "docstring_signature" and CORPUS_TASKS[SIGNATURE_TASK] is docstring_signature_task
    assert task.family == "classification" and task.pair and task.label_names == ["no", "yes"]
    assert task.prefix == "docstring signature"
    examples = [e for split in task.splits.values() for e in split]
    assert all(isinstance(e, Example) and e.text_pair for e in examples)
    # per module: open 2 + close 1 + put 1 + get 1 paragraphs; the shared line, the class's own
    # paragraph, the module's and the short lines are left out; two examples each
    assert len(examples) == 2 * 5 * 40
    for split, ss in task.splits.items():
        assert task.label_counts(split)["yes"] == task.label_counts(split)["no"] == len(ss) // 2
    by_paragraph = {}
    for e in examples:
        by_paragraph.setdefault(e.id.split("/")[0], []).append(e)
    assert len(by_paragraph) == 5 * 40
    for pid, pair in by_paragraph.items():
        assert sorted(e.label for e in pair) == ["no", "yes"]
        yes, no = sorted(pair, key=lambda e: e.label, reverse=True)
        assert yes.text_pair == no.text_pair and yes.text != no.text
        assert _owner(yes.text) == pid.split("#")[0]
        assert no.id == f"{pid}/{_owner(no.text)}"
    texts = {e.text for e in examples if e.label == "yes"}
    assert {"open0(path, mode=...)", "close0(handle)", "Store0.put(key, value)", "Store0.get(key, default=...)"} <= texts
    assert not any("Both methods" in e.text_pair for e in examples)  # the ambiguous shared line
    assert not any(e.text.startswith("tiny") for e in examples)  # a signature without a paragraph
    assert task.info["ambiguous_method_lines"] == 40


def test_a_paragraph_and_both_its_signatures_are_in_its_documents_split(built):
    params, task = built
    assert all(task.splits[s] for s in ("train", "validation", "test"))
    for split, ss in task.splits.items():
        for e in ss:
            assert split_of(e.id.split("#")[0], params.split) == split
            assert split_of(_owner(e.text), params.split) == split  # the negative's too: never another split's


def test_negatives_come_from_the_same_class_then_the_same_module(built):
    params, task = built
    tiers = Counter()
    for split, ss in task.splits.items():
        for e in ss:
            if e.label != "no":
                continue
            doc = e.id.split("#")[0]
            module = doc.split(":")[1]
            negative = _owner(e.text)
            if ":Store" in doc:  # a method: its class has another method
                assert negative == doc and e.text.startswith(doc.rsplit(":", 1)[1] + ".")
                tiers["class"] += 1
            elif any(split_of(f"stdlib:{module}:{n}", params.split) == split
                     for n in (f"open{module[1:]}", f"close{module[1:]}", f"Store{module[1:]}") if n not in doc):
                assert negative.split(":")[1] == module  # another signature of the module in the split
                tiers["module"] += 1
            else:
                assert negative.split(":")[1] != module
                tiers["split"] += 1
    assert tiers["class"] == 80 and tiers["module"] > 0 and tiers["split"] > 0
    assert sum(task.info["negatives_from"][s]["same_class"] for s in task.splits) == 80


def test_the_negatives_are_deterministic_and_follow_the_seed(tmp_path):
    docs = _signature_docs()
    write_docs(tmp_path / "clean", docs)
    params = params_at(tmp_path)
    first = docstring_signature_task(params)
    again = docstring_signature_task(params)
    assert first.splits == again.splits
    write_docs(tmp_path / "other", list(reversed(docs)), shards=3)  # another sharding: the same task
    assert docstring_signature_task(params_at(tmp_path, tmp_path / "other")).splits == first.splits
    other = docstring_signature_task(params, seed=1)
    assert [e.text_pair for s in other.splits.values() for e in s] == \
        [e.text_pair for s in first.splits.values() for e in s]
    assert [e.text for s in other.splits.values() for e in s] != [e.text for s in first.splits.values() for e in s]
    # load_task's seed (the fine-tuning stage's train.seed) reaches the negatives
    from lmforge.finetuning.tasks import load_task

    loaded = load_task("docstring_signature", params, seed=1, max_train=None, max_eval=None)
    assert sorted(e.text for e in loaded.splits["train"]) == sorted(e.text for e in other.splits["train"])
    assert loaded.info["seed"] == 1


def test_a_signature_whose_docstring_holds_the_paragraph_is_never_its_negative(tmp_path):
    same = "This paragraph is word for word in the docstrings of several functions here."
    docs = []
    for i in range(30):
        for name in ("alpha", "beta"):
            meta = {"module": f"m{i}", "docstring_of": "function", "parameters": [], "signature": f"{name}{i}()"}
            docs.append((f"stdlib:m{i}:{name}{i}", f"{same}\nOnly {name} number {i} says this in its docstring.",
                         json.dumps(meta)))
        meta = {"module": f"m{i}", "docstring_of": "function", "parameters": [], "signature": "main()"}
        docs.append((f"stdlib:m{i}:main", f"{same}\nThe main entry point of module {i} for the command line.",
                     json.dumps(meta)))
    write_docs(tmp_path / "clean", docs)
    task = load_task(SIGNATURE_TASK, params_at(tmp_path), max_train=None, max_eval=None)
    negatives = [e for s in task.splits.values() for e in s if e.label == "no"]
    assert negatives
    for e in negatives:
        assert e.text_pair != same  # every signature's docstring holds it: no negative
        assert not (e.text == "main()" and "main entry point" in e.text_pair)  # another module's main() is not one
    assert not any(e.text_pair == same for s in task.splits.values() for e in s)
    assert task.info["paragraphs_without_a_negative"] == 90


def test_a_class_docstrings_own_line_is_left_out_even_when_a_method_repeats_it(tmp_path):
    docs = _signature_docs(30)
    for i, (doc_id, text, meta) in enumerate(docs):
        if ":Store" in doc_id:
            meta = json.loads(meta)
            own = text.split("\n")[0]
            meta["method_signatures"][line_key(own)] = ["put(key, value)"]  # put's docstring repeats it
            docs[i] = (doc_id, text, json.dumps(meta))
    write_docs(tmp_path / "clean", docs)
    task = load_task(SIGNATURE_TASK, params_at(tmp_path), max_train=None, max_eval=None)
    assert sum(len(s) for s in task.splits.values()) == 2 * 5 * 30
    assert not any(e.text_pair.startswith("A store of things") for s in task.splits.values() for e in s)


def test_a_corpus_cleaned_before_the_signatures_were_recorded_is_an_error(tmp_path):
    write_docs(tmp_path / "clean", docstring_documents(90))  # docstring_of, but no signature metadata
    with pytest.raises(TaskError, match="re-run `lmforge clean`") as info:
        load_task(SIGNATURE_TASK, params_at(tmp_path))
    assert "signatures" in str(info.value)


def test_bad_signature_metadata_names_the_document(tmp_path):
    docs = _signature_docs(20)
    docs.append(("stdlib:bad:f", "Some words enough to make a paragraph of this line.",
                 json.dumps({"module": "bad", "docstring_of": "function", "signature": ["f", "x"]})))
    write_docs(tmp_path / "clean", docs)
    with pytest.raises(TaskError, match="stdlib:bad:f"):
        load_task(SIGNATURE_TASK, params_at(tmp_path))
