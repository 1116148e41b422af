from lmforge.corpus.stdlib import reflow, stdlib_documents


def test_reflow_joins_wrapped_lines_into_paragraphs():
    doc = "Return the thing.\n\nThis is a long\nparagraph that was\nwrapped.\n\nAnother one\nhere."
    assert reflow(doc) == "Return the thing.\nThis is a long paragraph that was wrapped.\nAnother one here."


def test_reflow_keeps_structure_on_its_own_lines():
    doc = "Usage example::\n\n    x = f(1)\n    y = g(x)\n\n>>> f(1)\n2\n\n- first item\n- second item\n  wrapped.\n\nAfter."
    lines = reflow(doc).splitlines()
    assert lines == ["Usage example::", "x = f(1)", "y = g(x)", ">>> f(1)", "2", "- first item", "- second item", "wrapped.", "After."]


def test_documents_have_unique_stable_ids_and_reflowed_text():
    docs = list(stdlib_documents())
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)) > 1000
    assert ids == sorted(ids, key=ids.index)  # stable order: a second pass gives the same list
    assert ids == [d.id for d in stdlib_documents()]
    by_id = {d.id: d for d in docs}
    # A known docstring, wrapped in the source, is one line per paragraph here.
    text = by_id["stdlib:textwrap:dedent"].text
    assert text.startswith("Remove any common leading whitespace from every line in `text`.")
    assert "\n" not in text.split("\n")[1] and len(text.splitlines()[1]) > 100
    assert not any(i.startswith("stdlib:test.") for i in ids)
