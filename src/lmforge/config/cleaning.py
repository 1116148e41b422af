"""The ``clean`` and ``quality`` sections of ``params.yaml``: C4's line and page rules, URL, line
and near-duplicate dedup, language ID, bad words, decontamination, and the optional quality
classifier after the clean stage (``lmforge.cleaning``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..bounded import DEFAULT_MAX_DOCUMENT_BYTES
from ..schema import StrictModel as _Strict


class LineRules(_Strict):
    """C4's line and page rules, applied in the reference order (see ``cleaning/filters.py``).

    Setting a rule's value to ``null`` (or ``false``) turns that rule off.
    """

    max_page_length: int | None = Field(190_000, ge=1, description="drop pages longer than this many characters")
    max_word_length: int | None = Field(1000, ge=1, description="drop a line with a word longer than this")
    citation_pattern: str | None = Field(
        r"\[\d*\]|\[edit\]|\[citation needed\]", description="regex of citation markers removed from lines"
    )
    end_marks: list[str] | None = Field(
        [".", "?", "!", '"'], description="a line must end with one of these (null: no end-mark rule)"
    )
    ellipsis: str | None = Field("...", description="a line ending with this is dropped")
    min_words_per_line: int | None = Field(5, ge=1)
    count_words_after_citation_removal: bool = Field(
        True, description="TFDS counts words after removing citations; datatrove before"
    )
    lorem_ipsum: bool = Field(True, description="drop the whole page if a line contains 'lorem ipsum'")
    javascript: bool = Field(True, description="drop lines containing 'javascript'")
    curly_brace: bool = Field(True, description="drop the whole page if a kept line contains '{'")
    policy_phrases: list[str] | None = Field(
        ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"]
    )
    min_sentences: int | None = Field(3, ge=1, description="drop pages with fewer sentences")

    @field_validator("lorem_ipsum", "javascript", "curly_brace", mode="before")
    @classmethod
    def _null_is_off(cls, value: Any) -> Any:
        return False if value is None else value

    @field_validator("citation_pattern")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        import re

        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class UrlConfig(_Strict):
    normalize: bool = True
    dedup: bool = Field(True, description="keep only the newest page per normalised URL")
    tracking_query_prefixes: list[str] = Field(
        ["utm_", "ref", "feed"], description="a query string starting with one of these is removed"
    )


class LineDedupConfig(_Strict):
    mode: Literal["lines", "sentence_spans", "off"] = Field(
        "lines", description="'lines': C4 as published; 'sentence_spans': the paper's three-sentence spans"
    )
    span_sentences: int = Field(3, ge=1)
    min_words_after_span_removal: int = Field(50, ge=0)


class LanguageConfig(_Strict):
    enabled: bool = True
    backend: Literal["cld2", "langdetect"] = "cld2"
    languages: list[str] = Field(["en"], min_length=1)
    threshold: float = Field(0.99, ge=0.0, le=1.0)


class BadWordsConfig(_Strict):
    enabled: bool = True
    path: str | None = Field(None, description="word list, one entry per line; null: the packaged LDNOOBW English list")


class NearDedupConfig(_Strict):
    enabled: bool = True
    ngram: int = Field(5, ge=1)
    bands: int = Field(14, ge=1)
    rows: int = Field(8, ge=1)
    seed: int = Field(1, ge=0)
    verify_threshold: float | None = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="keep an LSH candidate pair only if its signature similarity reaches this (null: no check)",
    )
    against: list[str] = Field(
        [], description="earlier clean outputs (null, a path or a list): drop documents that are exact or near "
                        "duplicates of one they kept, matched by the signatures they saved (same ngram, bands, rows, seed)")

    @field_validator("against", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _against_needs_signatures(self) -> "NearDedupConfig":
        if self.against and not self.enabled:
            raise ValueError("against needs enabled: true (the documents are matched by their MinHash signatures)")
        if any(not p for p in self.against):
            raise ValueError("against: an empty path")
        return self


class DecontaminateConfig(_Strict):
    """Training documents that share a run of ``ngram`` words with an evaluation text are removed
    (cleaning/decontaminate.py): the held-out documents of this corpus, the configured tasks'
    validation and test examples, and ``texts``."""

    enabled: bool = True
    ngram: int = Field(13, ge=1, description="words in a shared run that counts as overlap (GPT-3: 13)")
    min_words: int = Field(8, ge=1, description="a text (or line) shorter than ngram but this long is matched whole; "
                                                "a shorter one is not checked")
    mode: Literal["documents", "paragraphs"] = Field(
        "documents", description="documents: drop an overlapping training document; paragraphs: remove only its "
                                 "overlapping lines")
    held_out: bool = Field(True, description="the corpus's own validation and test documents are evaluation texts "
                                             "(the tasks built from the corpus draw on them)")
    tasks: bool = Field(True, description="the validation and test examples of finetune.tasks not built from the corpus")
    texts: list[str] = Field([], description="more evaluation texts: task specs (folders, hf:NAME), .txt files (a text "
                                             "per line) or .jsonl files (a 'text' field per line)")

    @model_validator(mode="after")
    def _lengths(self):
        if self.min_words > self.ngram:
            raise ValueError(f"min_words ({self.min_words}) must not exceed ngram ({self.ngram})")
        return self


class CleanConfig(_Strict):
    inputs: list[str] = Field(["stdlib"], min_length=1, description="paths, 'stdlib', or 'hf:NAME?config=..&split=..'")
    output: str = "data/clean"
    shard_size: int = Field(2000, ge=1, description="documents per shard")
    workers: int = Field(0, ge=0, description="processes; 0 means one per core")
    max_documents: int | None = Field(None, ge=1, description="cap on documents read from each input")
    on_bad_input: Literal["fail", "skip"] = Field("fail", description="a bad file: stop, or skip it and count it")
    max_document_bytes: int = Field(
        DEFAULT_MAX_DOCUMENT_BYTES, ge=1,
        description="a document (a JSONL line, a WET record's payload, a Parquet row's cells, a .txt file) over this many "
                    "bytes is never held whole: it is consumed in chunks and handled as on_too_long says")
    on_too_long: Literal["drop", "bad_input"] = Field(
        "drop", description="drop: count it in stats.json (dropped.too_long_input) and go on; "
                            "bad_input: it is bad input, which on_bad_input fails or skips")
    include_site_packages: bool | list[str] = Field(
        False, description="stdlib corpus: also installed packages' docstrings: true (all), or a list of top-level packages")
    dropped_samples: int = Field(20, ge=0, description="dropped documents kept per reason for inspection")
    keep_work: bool = Field(False, description="keep intermediate files after a successful run")
    rules: LineRules = LineRules()
    urls: UrlConfig = UrlConfig()
    line_dedup: LineDedupConfig = LineDedupConfig()
    language: LanguageConfig = LanguageConfig()
    bad_words: BadWordsConfig = BadWordsConfig()
    near_dedup: NearDedupConfig = NearDedupConfig()
    decontaminate: DecontaminateConfig = DecontaminateConfig()


# ----------------------------------------------------------------------------- the quality classifier


class QualityConfig(_Strict):
    """The optional model-based quality filter after the clean stage (off by default): a linear
    classifier on hashed word uni+bigrams (fastText's model family, in scikit-learn) trained to
    tell the ``reference`` documents from the clean corpus, which then keeps the corpus's most
    reference-like documents. When enabled, the tokenizers and token stores read its output."""

    enabled: bool = Field(False, description="run the quality stage; the stages after it read quality.output")
    reference: list[str] = Field([], description="the positives: paths (files or folders), 'stdlib' or 'hf:NAME?..'")
    output: str = "data/quality"
    keep_fraction: float | None = Field(0.5, gt=0, le=1, description="keep this top fraction of the documents by score")
    threshold: float | None = Field(None, ge=0, le=1, description="keep documents scoring at least this (set "
                                                                   "keep_fraction to null)")
    validation: float = Field(0.2, gt=0, lt=1, description="share of each class held out to measure the classifier")
    seed: int = Field(0, ge=0)
    max_documents: int = Field(50_000, ge=2, description="documents of each class the classifier trains on, at most")
    max_characters: int = Field(20_000, ge=1, description="characters of a document the classifier reads (its start)")
    features: int = Field(1 << 20, ge=16, description="hashed feature buckets of the word uni+bigrams")
    regularization: float = Field(1.0, gt=0, description="the logistic regression's C (larger: less regularised)")
    samples: int = Field(20, ge=0, description="kept and dropped documents written to samples/ for inspection")

    @model_validator(mode="after")
    def _one_rule(self) -> "QualityConfig":
        if (self.keep_fraction is None) == (self.threshold is None):
            raise ValueError("set exactly one of keep_fraction and threshold (the other null)")
        if self.enabled and not self.reference:
            raise ValueError("enabled, but no reference documents: list the reference set's paths in quality.reference")
        return self
