"""The stages' charts (``lmforge.charts``) drawn from known figures: each is a PNG of the size its
figure asks for, draws what it is given (the figure is inspected where a number must show), and
``write_charts`` writes what it can and reports what it cannot."""

from __future__ import annotations

import io
import struct

import pytest
from PIL import Image

from lmforge.charts import corpus, datasets, mixture, training, tokenizers, write_charts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, from its header; fails unless ``data`` is a PNG that decodes."""
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    Image.open(io.BytesIO(data)).load()  # the whole image decodes
    return struct.unpack(">II", data[16:24])


CLEAN_STATS = {
    "documents_in": 100, "documents_out": 80, "bytes_in": 50_000, "bytes_out": 30_000,
    "dropped": {"language": {"documents": 12, "bytes": 9_000}, "near_duplicate": {"documents": 5, "bytes": 4_000},
                "bad_words": {"documents": 3, "bytes": 2_000}},
    "length_histogram": {"lower_bounds": [0, 32, 64, 128, 256, 512],
                         "documents_in": [5, 10, 30, 40, 10, 5], "documents_out": [0, 5, 30, 35, 8, 2]},
    "languages": {"seen": {"en": 85, "de": 8, "fr": 4, "un": 3}, "dropped": {"de": 8, "fr": 4}},
    "near_duplicate_clusters": {"2": 3, "3": 1},
    "decontamination": {"evaluation_windows": 900, "training_documents_overlapping": 7,
                        "training_documents_overlapping_after": 0,
                        "tasks": {"docstring_kind": {"validation": [107, 4, 0], "test": [119, 12, 0]},
                                  "docstring_qa": {"skipped": "no metadata"}}},
}


def test_clean_charts_from_known_stats():
    drawings = corpus.clean_charts(CLEAN_STATS)
    assert set(drawings) == {"drops", "lengths", "languages", "near_duplicates", "decontamination"}
    sizes = {name: size(draw()) for name, draw in drawings.items()}
    assert sizes["drops"] == (1100, 400)  # two panels, documents and bytes
    assert all(s == (700, 400) for name, s in sizes.items() if name != "drops"), sizes
    # figures the stage did not record (language ID off, no near dedup) draw nothing
    off = corpus.clean_charts({**CLEAN_STATS, "languages": None, "near_duplicate_clusters": None,
                                "decontamination": None})
    assert off["languages"] is None and off["near_duplicates"] is None and off["drops"] is not None
    assert off["decontamination"] is None


def test_the_decontamination_chart_shows_each_split_before_and_after(monkeypatch):
    figures = drawn_figure(monkeypatch, corpus)
    corpus.decontamination(CLEAN_STATS)
    ax = figures[0].axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["4/107", "12/119", "0/107", "0/119"]  # before per split, then after; the skipped task absent
    assert [t.get_text() for t in ax.get_xticklabels()] == ["docstring_kind\nvalidation", "docstring_kind\ntest"]
    assert "7 training documents removed" in ax.get_title()


def drawn_figure(monkeypatch, module):
    """Make ``module``'s charts hand over their figure instead of PNG bytes: [figure]."""
    figures = []

    def keep(fig):
        figures.append(fig)
        return b""

    monkeypatch.setattr(module, "png", keep)
    return figures


def test_the_drop_waterfall_steps_from_read_to_kept(monkeypatch):
    figures = drawn_figure(monkeypatch, corpus)
    corpus.drops(CLEAN_STATS)
    docs_ax, bytes_ax = figures[0].axes
    labels = [t.get_text() for t in docs_ax.get_xticklabels()]
    assert labels == ["read", "language", "near_duplicate", "bad_words", "kept"]  # largest drop first
    bars = docs_ax.patches
    assert [round(b.get_height()) for b in bars] == [100, 12, 5, 3, 80]
    assert [round(b.get_y()) for b in bars] == [0, 88, 83, 80, 0]  # each drop hangs from the level before it
    # bytes: what the rules dropped, then the lines removed from kept documents (50k - 15k - 30k)
    assert [t.get_text() for t in bytes_ax.get_xticklabels()][-2:] == ["removed lines", "kept"]
    assert bytes_ax.patches[-2].get_height() == pytest.approx(5.0)  # kB


def test_length_bins_are_labelled_and_the_languages_split_by_the_rule(monkeypatch):
    assert corpus.length_labels([0, 32, 1024, 1 << 20]) == ["<32B", "32B-1KiB", "1KiB-1MiB", ">=1MiB"]
    figures = drawn_figure(monkeypatch, corpus)
    corpus.languages(CLEAN_STATS)
    (ax,) = figures[0].axes
    widths = [round(p.get_width()) for p in ax.patches]
    assert widths == [85, 0, 0, 3, 0, 8, 4, 0]  # passed (en, de, fr, un), then dropped


def test_tokenizer_charts():
    metrics = {"kind": "bpe", "fertility": {"documents": 3, "words": 10, "counts": [0, 6, 3, 1, 0, 0, 0, 0, 0]},
               "vocab_token_lengths": {"unit": "bytes", "counts": [1, 20, 30, 25, 10] + [0] * 12}}
    drawings = tokenizers.tokenizer_charts(metrics)
    assert {name: size(draw()) for name, draw in drawings.items()} == {"fertility": (700, 400), "token_lengths": (700, 400)}
    assert tokenizers.tokenizer_charts({"kind": "bpe"}) == {"fertility": None, "token_lengths": None}


def test_mixture_chart_draws_each_sources_three_shares(monkeypatch):
    sources = {"stdlib": {"weight": 2.0, "max_tokens": None, "tokens_after": 400, "share_before": 0.25,
                          "target_share": 0.5, "realised_share": 0.49},
               "site-packages": {"weight": 1.0, "max_tokens": 400, "tokens_after": 410, "share_before": 0.75,
                                 "target_share": 0.5, "realised_share": 0.51}}
    drawings = mixture.mixture_charts("bpe", sources)
    assert size(drawings["mixture"]()) == (800, 260)
    assert mixture.mixture_charts("bpe", {}) == {"mixture": None}
    figures = drawn_figure(monkeypatch, mixture)
    mixture.shares("bpe", sources)
    (ax,) = figures[0].axes
    # the larger source after weighting first: before, target, realised for each
    assert [round(p.get_width(), 2) for p in ax.patches] == [0.75, 0.25, 0.5, 0.5, 0.51, 0.49]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["site-packages\n(x1, cap 400)", "stdlib\n(x2)"]


def test_dataset_noise_chart_draws_the_configured_values(monkeypatch):
    from lmforge.datasets.rates import NOISE
    from lmforge.objectives.span_corruption import SpanCorruption

    stats = {"noise_fraction": 0.148, "mean_noise_span_length": 2.9, "noise_span_lengths": {"1": 10, "2": 12, "3": 8, "7": 1},
             "input_length_histogram": {"<64": 3, "<128": 40}}
    figures_of = NOISE["span_corruption"].figures(stats, SpanCorruption.Config(noise_density=0.15, mean_noise_span_length=3.0))
    assert figures_of["configured"] == 0.15 and figures_of["realised"] == 0.148 and figures_of["configured_mean"] == 3.0
    summary = {"objective": "span_corruption", "splits": {"train": stats, "validation": {"input_length_histogram": {"<128": 5}}}}
    drawings = datasets.dataset_charts(summary, figures_of, tolerance=0.02)
    assert {name: size(draw()) for name, draw in drawings.items()} == {"input_lengths": (700, 400), "masking": (1100, 400)}
    assert datasets.dataset_charts({"objective": "clm", "splits": {}})["masking"] is None

    figures = drawn_figure(monkeypatch, datasets)
    datasets.noise("span_corruption", **figures_of, tolerance=0.02)
    rate_ax, span_ax = figures[0].axes
    assert [round(b.get_height(), 3) for b in rate_ax.patches[:2]] == [0.15, 0.148]
    assert 3.0 in [line.get_xdata()[0] for line in span_ax.get_lines()]  # the configured mean span length
    shares = [round(b.get_height(), 4) for b in span_ax.patches]
    assert shares == [round(c / 31, 4) for c in (10, 12, 8, 1)]
    assert [t.get_text() for t in span_ax.get_xticklabels()] == ["1", "2", "3", "7"]


def test_run_curves_draw_the_unigram_baseline_the_learning_rate_and_the_throughput(monkeypatch):
    rows = [{"step": 1, "train/loss": 6.0, "lr": 1e-4, "tokens": 512, "tokens_per_second": 900.0},
            {"step": 2, "train/loss": 5.0, "lr": 2e-4, "tokens": 1024, "tokens_per_second": 1000.0},
            {"step": 2, "val/loss": 5.5}]
    assert size(training.run_curves(rows, "gpt", baseline=5.2)) == (700, 670)
    assert size(training.run_curves([r for r in rows if "lr" not in r], "gpt")) == (700, 350)  # the loss alone
    figures = drawn_figure(monkeypatch, training)
    training.run_curves(rows, "gpt", baseline=5.2)
    loss_ax, lr_ax, speed_ax = figures[0].axes
    flat = [line for line in loss_ax.get_lines() if len(set(line.get_ydata())) == 1 and line.get_ydata()[0] == 5.2]
    assert flat and "unigram baseline" in flat[0].get_label()
    assert list(lr_ax.get_lines()[0].get_ydata()) == [1e-4, 2e-4]
    assert list(speed_ax.get_lines()[0].get_ydata()) == [900.0, 1000.0]


def test_confusion_matrix_counts_and_chart():
    matrix = training.confusion_matrix(predicted=[0, 1, 1, 2, 0, 2], gold=[0, 1, 0, 2, 2, 2], n_labels=3)
    assert matrix == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]  # rows: gold
    width, height = size(training.confusion(["a", "b", "c"], matrix, "gpt on task"))
    assert width > height > 400
    assert size(training.confusion(["a", "b"], [[0, 0], [0, 0]], "empty"))  # no predictions: says so


def test_write_charts_writes_atomically_and_reports_a_failing_chart(tmp_path):
    def broken() -> bytes:
        raise ValueError("no figures")

    logs: list[str] = []
    written = write_charts(tmp_path, {"ok": lambda: training.confusion(["a"], [[1]], "t"), "broken": broken,
                                      "absent": None}, logs.append)
    assert written == [tmp_path / "ok.png"] and size((tmp_path / "ok.png").read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.png"]  # no temporary file, nothing for the others
    assert logs == ["warning: chart broken.png not drawn: ValueError: no figures"]
