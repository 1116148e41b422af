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


def _fake_site_packages(tmp_path, monkeypatch):
    import sysconfig

    site = tmp_path / "site-packages"
    (site / "pkgx" / "sub").mkdir(parents=True)
    (site / "pkgx" / "tests").mkdir()
    (site / "pkgx" / "__init__.py").write_text('"""The pkgx package does one thing well."""\n')
    (site / "pkgx" / "sub" / "__init__.py").write_text("")
    (site / "pkgx" / "sub" / "core.py").write_text('def run():\n    """Run the core loop until it stops."""\n')
    (site / "pkgx" / "tests" / "helpers.py").write_text('"""Helpers of the package\'s own tests."""\n')
    (site / "notapackage.py").write_text('"""A module, not a package folder."""\n')
    real = sysconfig.get_paths()
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {**real, "purelib": str(site)})
    return site


def test_selected_site_packages_join_the_corpus_after_the_stdlib(tmp_path, monkeypatch):
    _fake_site_packages(tmp_path, monkeypatch)
    docs = list(stdlib_documents(["pkgx"]))
    extra = [d for d in docs if d.source == "site-packages"]
    assert [d.id for d in extra] == ["site-packages:pkgx", "site-packages:pkgx.sub.core:run"]
    assert extra[1].metadata["docstring_of"] == "function" and extra[1].metadata["module"] == "pkgx.sub.core"
    assert docs[: len(docs) - 2] == [d for d in docs if d.source == "stdlib"]  # the stdlib first, unchanged
    assert [d.id for d in stdlib_documents(False)] == [d.id for d in docs[: len(docs) - 2]]


def test_an_unknown_site_package_is_one_error_naming_it(tmp_path, monkeypatch):
    import pytest

    from lmforge.corpus.document import CorpusError
    from lmforge.corpus.sources import resolve_inputs

    _fake_site_packages(tmp_path, monkeypatch)
    for name in ("nope", "notapackage.py", "../pkgx"):
        with pytest.raises(CorpusError, match="is not an installed package") as info:
            resolve_inputs(["stdlib"], [name])
        assert repr(name) in str(info.value) and "\n" not in str(info.value)
