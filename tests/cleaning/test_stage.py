"""The clean stage end to end: URL dedup, line dedup semantics, near dedup, stats, resume."""

import bisect
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from lmforge.cleaning.shards import LENGTH_BOUNDS
from lmforge.cleaning.stage import run_clean
from lmforge.cleaning.dedup.urls import normalize_url
from lmforge.config import CleanConfig
from lmforge.corpus.document import CorpusError
from lmforge.testing.documents import page, sentence, write_jsonl


def clean(tmp_path, inputs, name="out", **kw):
    kw.setdefault("workers", 1)
    cfg = CleanConfig(inputs=inputs, output=str(tmp_path / name), **kw)
    logs = []
    result = run_clean(cfg, log=logs.append)
    rows = []
    for f in sorted((tmp_path / name).glob("shard-*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return result, rows, logs


def test_url_dedup_keeps_the_newest_crawl(tmp_path):
    rng = random.Random(1)
    docs = [
        {"id": "old", "url": "http://www.example.com/a/", "timestamp": "2019-01-01T00:00:00Z", "text": page(rng)},
        {"id": "new", "url": "https://example.com/a", "timestamp": "2019-06-01T00:00:00Z", "text": page(rng)},
        {"id": "mid", "url": "https://example.com/a?utm_source=feed", "timestamp": "2019-03-01T00:00:00Z", "text": page(rng)},
        {"id": "other", "url": "https://example.com/b", "timestamp": "2018-01-01T00:00:00Z", "text": page(rng)},
        {"id": "tie-first", "url": "https://example.com/c", "timestamp": "2018-01-01T00:00:00Z", "text": page(rng)},
        {"id": "tie-second", "url": "https://example.com/c/", "timestamp": "2018-01-01T00:00:00Z", "text": page(rng)},
        {"id": "no-time", "url": "https://example.com/d", "text": page(rng)},
        {"id": "timed", "url": "https://example.com/d", "timestamp": "2017-01-01T00:00:00Z", "text": page(rng)},
    ]
    result, rows, _ = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)])
    assert sorted(r["id"] for r in rows) == ["new", "other", "tie-first", "timed"]
    assert result.stats["dropped"]["url_duplicate"]["documents"] == 4
    samples = [json.loads(x) for x in (tmp_path / "out" / "dropped" / "url_duplicate.jsonl").read_text().splitlines()]
    assert {s["id"] for s in samples} == {"old", "mid", "tie-second", "no-time"}


def test_line_dedup_reference_semantics(tmp_path):
    rng = random.Random(2)
    shared = sentence(rng) + " " + sentence(rng)
    a_url, b_url = "https://a.example.org/page", "https://b.example.org/page"
    digest = {u: hashlib.md5(normalize_url(u).encode()).hexdigest() for u in (a_url, b_url)}
    owner = min(digest, key=digest.get)  # the page whose URL hash sorts first keeps the line
    a_text = "\n".join([page(rng, 2), shared, shared])  # repeated inside the page too
    b_text = "\n".join([page(rng, 2), shared])
    short = "\n".join([sentence(rng) + " " + sentence(rng), shared])  # 2 sentences once the shared line goes
    docs = [
        {"id": "A", "url": a_url, "text": a_text},
        {"id": "B", "url": b_url, "text": b_text},
        {"id": "C", "url": "https://c.example.org/", "text": short},
    ]
    result, rows, _ = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)], near_dedup={"enabled": False})
    by_id = {r["id"]: r["text"].split("\n") for r in rows}
    owner_id = "A" if owner == a_url else "B"
    other_id = "B" if owner_id == "A" else "A"
    assert by_id[owner_id].count(shared) == 1  # kept once in its owner; the repeat is a local duplicate
    assert shared not in by_id[other_id]
    assert "C" not in by_id  # lost its shared line, then failed the sentence re-check
    lines = result.stats["lines_removed"]
    assert lines["line:local_duplicate"] == 1
    assert lines["line:global_duplicate"] == 2  # in the non-owner page and in C
    assert result.stats["dropped"]["too_few_sentences_after_dedup"]["documents"] == 1


def test_sentence_span_dedup(tmp_path):
    rng = random.Random(3)
    span = " ".join(sentence(rng) for _ in range(3))
    first = page(rng, 3) + "\n" + span
    second = span + "\n" + page(rng, 6)
    tiny = span + "\n" + sentence(rng) + " " + sentence(rng) + " " + sentence(rng)
    docs = [{"id": "first", "text": first}, {"id": "second", "text": second}, {"id": "tiny", "text": tiny}]
    result, rows, _ = clean(
        tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)], line_dedup={"mode": "sentence_spans"}, near_dedup={"enabled": False}
    )
    by_id = {r["id"]: r["text"] for r in rows}
    assert span in by_id["first"]  # the first occurrence keeps the span
    assert span.split(". ")[0] not in by_id["second"]
    assert "tiny" not in by_id  # under 50 words once the span is removed
    assert result.stats["dropped"]["span_duplicates"]["documents"] == 1


def test_near_duplicates_keep_the_first_of_each_cluster(tmp_path):
    rng = random.Random(4)
    base = page(rng, lines=6, per_line=2)
    words = base.split(" ")
    words[len(words) // 2] = "xylophone"
    near = " ".join(words)
    docs = [{"id": "orig", "text": base}, {"id": "other", "text": page(rng, 6)}, {"id": "copy", "text": near}]
    result, rows, _ = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)], line_dedup={"mode": "off"})
    assert sorted(r["id"] for r in rows) == ["orig", "other"]
    (sample,) = [json.loads(x) for x in (tmp_path / "out" / "dropped" / "near_duplicate.jsonl").read_text().splitlines()]
    assert sample["id"] == "copy" and sample["metadata"]["duplicate_of_ordinal"] == 0


def test_near_duplicate_clusters_are_counted_drawn_and_shown(tmp_path):
    from types import SimpleNamespace

    from lmforge.stages import KINDS
    from lmforge.stages.kind import Image

    rng = random.Random(8)
    docs = [{"id": f"d{i}", "text": page(rng)} for i in range(12)]
    # d0 has two copies, d1 and d2 one each: clusters of 3, 2 and 2
    docs += [{"id": f"copy{i}", "text": docs[j]["text"]} for i, j in enumerate((0, 0, 1, 2))]
    result, rows, _ = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)], line_dedup={"mode": "off"})
    s = result.stats
    assert len(rows) == 12 and s["dropped"]["near_duplicate"]["documents"] == 4
    assert s["near_duplicate_clusters"] == {"2": 2, "3": 1}
    out = tmp_path / "out"
    for name in ("drops", "lengths", "languages", "near_duplicates"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    shown = KINDS["clean"].metadata(SimpleNamespace(key={}), None, out)
    assert {k for k, v in shown.items() if isinstance(v, Image)} == {"drops", "lengths", "languages", "near_duplicates"}


def broken_drawing(stats):
    raise RuntimeError("cannot draw")


def test_a_failing_chart_is_reported_and_the_corpus_still_published(tmp_path, monkeypatch):
    from lmforge.charts import corpus

    monkeypatch.setattr(corpus, "drops", broken_drawing)  # sent to the worker that draws it by name
    rng = random.Random(9)
    result, rows, logs = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(6)])],
                               near_dedup={"enabled": False})
    out = tmp_path / "out"
    assert len(rows) == 6 and (out / "stats.json").exists() and (out / "lengths.png").exists()
    assert not (out / "drops.png").exists() and not (out / "near_duplicates.png").exists()  # near dedup off: nothing to draw
    assert "warning: chart drops.png not drawn: RuntimeError: cannot draw" in logs


def test_stats_and_outputs(tmp_path):
    rng = random.Random(5)
    docs = [{"id": f"d{i}", "url": f"https://site{i}.example/", "text": page(rng)} for i in range(30)]
    docs += [
        {"id": "brace", "text": page(rng) + "\nThe dict {a: 1} shows up in this sentence here."},
        {"id": "lorem", "text": page(rng) + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit."},
        {"id": "german", "text": "Der Ausschuss traf sich am Dienstag, um den Haushalt zu besprechen. " * 4},
        {"id": "short", "text": "Just one sentence here, nothing more to say."},
        {"id": "bad", "text": page(rng) + "\nThis sentence mentions porn to trip the word filter."},
    ]
    result, rows, _ = clean(tmp_path, [write_jsonl(tmp_path / "c.jsonl", docs)], shard_size=7)
    s = result.stats
    assert s["documents_in"] == 35 and s["documents_out"] == 30 == len(rows)
    assert {r: d["documents"] for r, d in s["dropped"].items()} == {
        "curly_brace": 1, "lorem_ipsum": 1, "language": 1, "too_few_sentences": 1, "bad_words": 1
    }
    assert s["bytes_in"] == sum(len(d["text"].encode()) for d in docs)
    assert s["bytes_out"] == sum(len(r["text"].encode()) for r in rows)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("shard-*.parquet")) == [f"shard-{i:05d}.parquet" for i in range(5)]
    assert not (out / ".work").exists() and not (tmp_path / ".out.work").exists()
    assert json.loads((out / "stats.json").read_text())["documents_out"] == 30
    assert {p.stem for p in (out / "dropped").glob("*.jsonl")} == set(s["dropped"])
    assert set(pq.read_schema(out / "shard-00000.parquet").names) == {"id", "text", "url", "timestamp", "source", "metadata"}
    assert [r["id"] for r in rows] == [f"d{i}" for i in range(30)]  # input order is kept
    # document lengths in fixed bins, read and kept: every document counted once, in its bin
    h = s["length_histogram"]
    assert h["lower_bounds"] == list(LENGTH_BOUNDS)
    expected_in, expected_out = [0] * len(LENGTH_BOUNDS), [0] * len(LENGTH_BOUNDS)
    for texts, counts in (([d["text"] for d in docs], expected_in), ([r["text"] for r in rows], expected_out)):
        for t in texts:
            counts[bisect.bisect_right(LENGTH_BOUNDS, len(t.encode())) - 1] += 1
    assert h["documents_in"] == expected_in and sum(expected_in) == 35
    assert h["documents_out"] == expected_out and sum(expected_out) == 30
    # language ID saw the documents the C4 rules kept (all but brace, lorem and short); it dropped the German one
    assert s["languages"]["dropped"] == {"de": 1} and s["languages"]["seen"]["de"] == 1
    assert sum(s["languages"]["seen"].values()) == 32 and s["languages"]["seen"]["en"] >= 30
    assert s["near_duplicate_clusters"] == {}


def test_stats_list_the_kept_documents_by_source(tmp_path):
    """The names tokenize.mixture weights: each kept document's source, counted in stats.json and printed."""
    from types import SimpleNamespace

    from lmforge.stages.kinds.clean import summary

    rng = random.Random(8)
    web = write_jsonl(tmp_path / "web.jsonl", [{"id": f"w{i}", "text": page(rng)} for i in range(9)]
                      + [{"id": "short", "text": "Just one sentence here, nothing more to say."}])
    books = tmp_path / "books"
    books.mkdir()
    for i in range(4):
        (books / f"b{i}.txt").write_text(page(rng), encoding="utf-8")
    result, rows, _ = clean(tmp_path, [web, str(books)], shard_size=4)
    expected = {}
    for r in rows:
        e = expected.setdefault(r["source"], {"documents": 0, "bytes": 0})
        e["documents"] += 1
        e["bytes"] += len(r["text"].encode())
    assert result.stats["sources"] == expected
    assert sorted(expected) == sorted([web] + [str(books / f"b{i}.txt") for i in range(4)])
    assert expected[web]["documents"] == 9  # the short one dropped
    text = summary(None, {"stats": result.stats, "seconds": 0.0, "skipped": False})
    assert f"    {web:32s}        9" in text


def test_parallel_and_serial_runs_are_byte_identical_and_rerun_is_up_to_date(tmp_path):
    rng = random.Random(6)
    docs = [{"id": f"d{i}", "text": page(rng)} for i in range(60)]
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    clean(tmp_path, [src], name="serial", workers=1, shard_size=9)
    clean(tmp_path, [src], name="parallel", workers=2, shard_size=9)
    for f in sorted((tmp_path / "serial").glob("shard-*.parquet")):
        assert f.read_bytes() == (tmp_path / "parallel" / f.name).read_bytes()
    result, _, logs = clean(tmp_path, [src], name="parallel", workers=2, shard_size=9)
    assert result.skipped and "up to date" in logs[0]


def test_corrupted_intermediate_is_detected_and_redone(tmp_path):
    rng = random.Random(7)
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(20)])
    clean(tmp_path, [src], shard_size=5, keep_work=True)
    out = tmp_path / "out"
    reference = {f.name: f.read_bytes() for f in out.glob("shard-*.parquet")}
    (tmp_path / ".out.work" / "filter" / "shard-00001.parquet").write_bytes(b"garbage")
    (out / "stats.json").unlink()
    _, _, logs = clean(tmp_path, [src], shard_size=5, keep_work=True)
    assert any("filter shard: 3 of 4 units already done" in line for line in logs)
    assert {f.name: f.read_bytes() for f in out.glob("shard-*.parquet")} == reference


def test_empty_corpus_is_an_error_and_writes_nothing(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(CorpusError, match="empty corpus"):
        clean(tmp_path, [str(tmp_path / "empty.jsonl")])
    assert not list((tmp_path / "out").glob("shard-*")) and not (tmp_path / "out" / "stats.json").exists()


def test_skipped_inputs_are_reported(tmp_path):
    rng = random.Random(8)
    good = write_jsonl(tmp_path / "good.jsonl", [{"text": page(rng)}])
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00binary")
    result, rows, _ = clean(tmp_path, [good, str(tmp_path / "bad.txt"), str(tmp_path / "gone.jsonl")], on_bad_input="skip")
    skipped = result.stats["inputs"]["skipped_inputs"]
    assert len(rows) == 1 and len(skipped) == 2
    assert "binary" in skipped[0]["error"] and "not found" in skipped[1]["error"]


@pytest.mark.slow
def test_resume_after_kill_is_byte_identical(tmp_path):
    rng = random.Random(9)
    src = write_jsonl(tmp_path / "c.jsonl", [{"id": f"d{i}", "url": f"https://s{i % 150}.example/", "text": page(rng)} for i in range(400)])
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lmforge.cli", "clean", "-i", src, "-o", str(out), "--params", os.devnull,
           "--workers", "1", "--set", "clean.shard_size=4"]
    subprocess.run(cmd, check=True, capture_output=True)
    reference = {f.relative_to(out).as_posix(): f.read_bytes() for f in out.rglob("*") if f.is_file()}
    shutil.rmtree(out)

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list((tmp_path / ".out.work" / "filter").glob("*.done"))) >= 3:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "stats.json").exists()

    resumed = subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert "already done, reused" in resumed.stderr
    result = {f.relative_to(out).as_posix(): f.read_bytes() for f in out.rglob("*") if f.is_file()}
    assert result == reference


def test_each_pass_reports_its_units_done_of_the_total(tmp_path, capsys):
    """Off a terminal (pytest's captured stderr) each pass ends with one line: its units done of
    all of them (here 3 shards of 40 documents), with the rate and the time taken."""
    rng = random.Random(3)
    write_jsonl(tmp_path / "in.jsonl", [{"id": f"d{i}", "text": page(rng)} for i in range(120)])
    clean(tmp_path, [str(tmp_path / "in.jsonl")], shard_size=40)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("clean: ")]
    assert any(line.startswith("clean: filter shard: 3/3 units (") and "units/s" in line for line in lines), lines
    assert any(line.startswith("clean: write final: 3/3 units (") for line in lines), lines
