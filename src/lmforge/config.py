"""The typed schema of ``params.yaml``: the one configuration every stage reads.

Every model rejects unknown keys, so a typo is an error rather than a silently ignored
setting. Defaults are the reference constants (for cleaning: the TFDS C4 implementation),
so an empty ``params.yaml`` is a valid one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from .bounded import DEFAULT_MAX_DOCUMENT_BYTES
from .errors import ConfigError
from .models.registry import ARCHITECTURES
from .objectives.registry import OBJECTIVES
from .schema import StrictModel
from .tokenizer_kinds import KINDS as TOKENIZER_KINDS


_Strict = StrictModel


# ----------------------------------------------------------------------------- cleaning


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


# ----------------------------------------------------------------------------- where the data stages run


class ExecutorConfig(_Strict):
    """Where the data stages (clean, tokenize) run their shards and partitions. Either way the
    output is the same, byte for byte, so the choice is not one of the stages' parameters."""

    kind: Literal["local", "ray"] = Field(
        "local", description="local: this machine's process pool; ray: Ray tasks on a cluster")
    ray_address: str | None = Field(
        None, description="null: a Ray instance started on this machine for the stage; 'auto': the cluster this "
                          "machine joined with `ray start`; 'HOST:6379' or 'ray://HOST:10001'")
    cpus_per_task: float = Field(1.0, gt=0, description="CPUs Ray reserves for each task")
    max_retries: int = Field(3, ge=0, description="times Ray runs a task again after its worker process died")


# ----------------------------------------------------------------------------- tokenizers


def _check_roles(allowed: set[str], required: set[str]):
    """A validator for ``special_tokens``: known roles only, the required ones present, no token twice."""

    def check(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = set(value) - allowed
        if unknown:
            raise ValueError(f"unknown role(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        missing = required - set(value)
        if missing:
            raise ValueError(f"missing role(s) {sorted(missing)}")
        if len(set(value.values())) != len(value):
            raise ValueError("a token is given for two roles")
        if any(not t for t in value.values()):
            raise ValueError("empty token")
        return value

    return field_validator("special_tokens")(classmethod(check))


class BpeConfig(_Strict):
    """Byte-level BPE (GPT, BART, Transformer-XL): GPT-2 pre-tokenisation, no normalisation."""

    vocab_size: int = Field(8000, ge=300, description="including the 256 byte symbols and the specials")
    min_frequency: int = Field(2, ge=1)
    special_tokens: dict[str, str] = Field(
        {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"},
        description="role -> token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"bos", "pad", "eos", "unk", "mask"}, required={"pad", "eos"})


class WordPieceConfig(_Strict):
    """WordPiece (BERT, ERNIE)."""

    vocab_size: int = Field(8000, ge=100)
    min_frequency: int = Field(2, ge=1)
    lowercase: bool = True
    strip_accents: bool | None = Field(None, description="null: strip accents when lower-casing, as BERT does")
    special_tokens: dict[str, str] = Field(
        {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
        description="role -> token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"pad", "unk", "cls", "sep", "mask"}, required={"pad", "unk", "cls", "sep", "mask"})


class UnigramConfig(_Strict):
    """Unigram with Metaspace (T5, Switch, ALBERT, XLNet): one vocabulary with every family's specials."""

    vocab_size: int = Field(8000, ge=100, description="including the specials and the sentinels")
    sentinels: int = Field(100, ge=0, description="T5 <extra_id_N> tokens at the top ids")
    normalization: Literal["nfkc", "none"] = "nfkc"
    lowercase: bool = False
    special_tokens: dict[str, str] = Field(
        {"pad": "<pad>", "eos": "</s>", "unk": "<unk>", "bos": "<s>", "cls": "<cls>", "sep": "<sep>",
         "mask": "<mask>", "eod": "<eod>", "eop": "<eop>"},
        description="role -> token, at ids 0, 1, ... in this order (T5: pad 0, eos 1, unk 2)",
    )

    _roles = _check_roles({"pad", "eos", "unk", "bos", "cls", "sep", "mask", "eod", "eop"}, required={"pad", "eos", "unk"})

    @field_validator("special_tokens")
    @classmethod
    def _t5_ids(cls, value: dict[str, str]) -> dict[str, str]:
        if list(value)[:3] != ["pad", "eos", "unk"]:
            raise ValueError("the first three roles must be pad, eos, unk (ids 0, 1, 2 as in T5)")
        return value

    @model_validator(mode="after")
    def _room_for_pieces(self) -> UnigramConfig:
        reserved = self.sentinels + len(self.special_tokens)
        if reserved >= self.vocab_size:
            raise ValueError(f"sentinels ({self.sentinels}) and the {len(self.special_tokens)} special tokens take "
                             f"{reserved} of vocab_size ({self.vocab_size}) ids, leaving none for learned pieces; "
                             f"sentinels must be below {self.vocab_size - len(self.special_tokens)}")
        return self


class CharConfig(_Strict):
    """ELMo characters (bilm scheme) and the word vocabulary its softmax predicts."""

    word_vocab_size: int = Field(10000, ge=10)
    min_frequency: int = Field(1, ge=1)
    max_characters: int = Field(50, ge=3, description="characters per token, bow and eow included")
    special_tokens: dict[str, str] = Field(
        {"pad": "<pad>", "unk": "<unk>", "bos": "<S>", "eos": "</S>"},
        description="role -> word-vocabulary token, at ids 0, 1, ... in this order",
    )

    _roles = _check_roles({"pad", "unk", "bos", "eos"}, required={"pad", "unk", "bos", "eos"})


class SplitConfig(_Strict):
    """Train / validation / test by a stable hash of the document id."""

    validation: float = Field(0.05, ge=0.0, lt=1.0)
    test: float = Field(0.05, ge=0.0, lt=1.0)
    salt: str = "lmforge"

    @field_validator("test")
    @classmethod
    def _leaves_training_data(cls, value: float, info: Any) -> float:
        if value + info.data.get("validation", 0.0) >= 1.0:
            raise ValueError("validation + test must be below 1 (nothing would be left to train on)")
        return value


TokenizerKind = Literal[TOKENIZER_KINDS]  # the kinds of tokenizer_kinds.py


class TokenizerConfig(_Strict):
    input: str | None = Field(None, description="clean Parquet shards; null: quality.output when quality is enabled, "
                                                "else clean.output")
    output: str = "data/tokenizers"
    kinds: list[TokenizerKind] = Field(list(TOKENIZER_KINDS), min_length=1)
    max_training_documents: int | None = Field(None, ge=1)
    bpe: BpeConfig = BpeConfig()
    wordpiece: WordPieceConfig = WordPieceConfig()
    unigram: UnigramConfig = UnigramConfig()
    char: CharConfig = CharConfig()


class MixtureRule(_Strict):
    """How much of one source the token store's train split takes (``tokenize.mixture``): every
    document ``floor(weight)`` times and a deterministic ``weight - floor(weight)`` of them once
    more, then at most ``max_tokens`` tokens of those copies."""

    weight: float = Field(1.0, ge=0.0, le=1000.0, description="copies per document: 2.5 = each twice and half of them a third time; 0.3 = 30% of them")
    max_tokens: int | None = Field(None, ge=1, description="the source's train tokens at most (documents in a deterministic order until the cap); null: no cap")

    @model_validator(mode="before")
    @classmethod
    def _says_something(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data:
            raise ValueError("give weight and/or max_tokens")
        return data


class TokenizeConfig(_Strict):
    output: str = "data/tokens"
    kinds: list[TokenizerKind] | None = Field(None, description="null: every kind in tokenizer.kinds")
    batch_size: int = Field(1000, ge=1, description="documents encoded per batch (bounds memory)")
    mixture: dict[str, MixtureRule] = Field(
        default_factory=dict, description="source (as the clean stage records it, or a folder of them) -> its weight "
                                          "and/or max_tokens in the train split; {}: every document once")
    mixture_seed: int = Field(0, ge=0, description="which documents a fractional weight or a cap takes")

    @field_validator("mixture")
    @classmethod
    def _named_sources(cls, value: dict[str, MixtureRule]) -> dict[str, MixtureRule]:
        for name in value:
            if not name.strip() or name != name.strip():
                raise ValueError(f"{name!r}: a source name, without surrounding spaces")
        return value


def _objective_config(name: str):
    return OBJECTIVES[name].Config


class DatasetConfig(_Strict):
    """The dataset stage and every objective's parameters (defaults: the reference values)."""

    output: str = "data/datasets"
    objectives: list[str] = Field(
        ["clm", "mlm", "mlm_nsp", "mlm_sop", "knowledge_mlm", "span_corruption", "denoising", "permutation", "segments", "bilm"],
        description="what `lmforge run` builds",
    )
    mode: Literal["dynamic", "static"] = Field("dynamic", description="dynamic: masks re-drawn each epoch; static: epoch 0 written to disk")
    seed: int = Field(0, ge=0)
    statistics_examples: int = Field(2000, ge=1, description="dynamic mode: examples measured for stats.json")
    # Sequence lengths are the embedded default's (CPU-sized, 128 positions); each objective's
    # own Config carries the paper's value (512 for GPT, T5, BART, XLNet) for a GPU recipe.
    clm: _objective_config("clm") = _objective_config("clm")(block_size=128)
    mlm: _objective_config("mlm") = _objective_config("mlm")()
    mlm_nsp: _objective_config("mlm_nsp") = _objective_config("mlm_nsp")()
    mlm_sop: _objective_config("mlm_sop") = _objective_config("mlm_sop")()
    knowledge_mlm: _objective_config("knowledge_mlm") = _objective_config("knowledge_mlm")()
    span_corruption: _objective_config("span_corruption") = _objective_config("span_corruption")(input_length=128)
    denoising: _objective_config("denoising") = _objective_config("denoising")(max_length=128)
    permutation: _objective_config("permutation") = _objective_config("permutation")(max_length=128)
    segments: _objective_config("segments") = _objective_config("segments")(segment_length=64, batch_size=16)
    bilm: _objective_config("bilm") = _objective_config("bilm")()

    @field_validator("objectives")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in OBJECTIVES]
        if unknown:
            raise ValueError(f"unknown objective(s) {unknown}; known: {sorted(OBJECTIVES)}")
        return value


# ----------------------------------------------------------------------------- training

# every architecture of the model registry, in its order (read without importing torch)
ARCHITECTURE_NAMES = list(ARCHITECTURES)


class TrainConfig(_Strict):
    """Pretraining and fine-tuning: which recipes run, and the Lightning Trainer settings that
    are the machine's rather than the recipe's (accelerator, devices, precision, ...)."""

    output: str = Field("models", description="checkpoints and trained models: <output>/<arch>/pretrain, <output>/<arch>/<task>")
    recipes: str = Field("pipelines", description="folder of per-architecture recipes (<arch>.yaml)")
    architectures: list[str] = Field(ARCHITECTURE_NAMES, description="what `lmforge run` trains")
    size: str = Field("tiny", description="which size of each recipe to run (tiny: CPU; base: GPU)")
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int | Literal["auto"] = Field(1, description="devices per node; >1 needs torchrun (or srun), see docs/TRAINING.md")
    num_nodes: int = Field(1, ge=1)
    strategy: Literal["auto", "ddp", "fsdp", "ddp_find_unused_parameters_true"] = "auto"
    precision: str | None = Field(None, description="null: bf16-mixed on a GPU that supports it, 32-true on CPU")
    compile: bool = Field(False, description="torch.compile the model")
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = Field(
        "default", description="torch.compile's mode with compile: true (reduce-overhead: CUDA graphs of the step)")
    seed: int = Field(0, ge=0)
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes")
    max_steps: int | None = Field(None, ge=1, description="override every recipe's pretraining steps (quick experiments)")
    budget_minutes: float | None = Field(None, gt=0, description="pretrain every recipe for this many wall-clock minutes "
                                         "instead of its steps (max_steps, if given, caps the steps); the schedule "
                                         "decays to its floor at the budget's end")
    finetune_max_steps: int | None = Field(None, ge=1, description="override every recipe's fine-tuning steps")
    checkpoint_every: int = Field(50, ge=1, description="optimizer steps between checkpoints (last.ckpt)")
    keep_attempts: int = Field(2, ge=1, description="attempts (checkpoints of one set of settings, beside the output in "
                                                    ".<output>.attempts/) kept after a run finishes, the latest first")
    restart: bool = Field(False, description="discard the resume state of the current settings and train from the start "
                                             "(`--restart`); never implied by changed settings")
    log_every: int = Field(5, ge=1, description="optimizer steps between logged training metrics")
    threads: int | None = Field(None, ge=1, description="torch intra-op threads on CPU (null: torch's default)")

    @field_validator("architectures")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [v for v in value if v not in ARCHITECTURE_NAMES]
        if unknown:
            raise ValueError(f"unknown architecture(s) {unknown}; known: {ARCHITECTURE_NAMES}")
        return value


class FinetuneConfig(_Strict):
    """Downstream tasks: the default is built from the embedded corpus (finetuning/tasks/docstring_kind.py)."""

    tasks: list[str] = Field(["docstring_kind"], description="task names, local folders, or hf:NAME[/CONFIG]")

    @field_validator("tasks")
    @classmethod
    def _named(cls, value: list[str]) -> list[str]:
        for task in value:  # a task's outputs are <train.output>/<arch>/<its last name>: "." or ".." would be above
            last = task.removeprefix("hf:").replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
            if last.strip(".") == "":
                raise ValueError(f"{task!r} does not name a task: its last part ({last!r}) names no folder of its "
                                 "own; give the task folder's own path")
        return value
    max_length: int = Field(128, ge=8, description="tokens per fine-tuning input")
    max_train_examples: int | None = Field(4000, ge=1, description="cap on training examples per task (seeded sample)")
    scratch_control: bool = Field(True, description="also fine-tune each architecture from random initialisation with the "
                                                    "same recipe and budget (<task>-scratch): what pretraining is worth")


class EvaluateConfig(_Strict):
    output: str = Field("data/report", description="leaderboard, charts, per-architecture metrics")
    validation_batches: int | None = Field(None, ge=1, description="cap on validation batches (null: the whole split)")
    harness: list[str] = Field(
        default_factory=lambda: ["docstring_next"],
        description="zero-shot tasks scored for each generative architecture (GPT, Transformer-XL, XLNet, BART, T5, "
                    "Switch) and its untrained floor: docstring_next (built from the held-out documents; scored by "
                    "lm-eval where installed, else by lmforge with lm-eval's definitions), a task YAML file, or an "
                    "lm-eval task name (these two need pip install 'lmforge[eval]'); empty: none")
    harness_questions: int = Field(200, ge=4, description="docstring_next: questions drawn from the held-out documents, "
                                                          "at most")


class TrackingConfig(_Strict):
    """MLflow. ``uri: null`` is the embedded default, sqlite:///<project>/mlflow.db."""

    enabled: bool = True
    uri: str | None = None
    experiment: str = "lmforge"
    register_models: bool = Field(True, description="register trained models (lmforge-<arch>, lmforge-<arch>-<task>)")
    promotion_metric: str = Field("accuracy", description="fine-tuning metric the champion alias is gated on")
    timeout_seconds: float = Field(5.0, gt=0, description="an http(s) tracking server must answer within this at the "
                                                          "start of a training stage")
    spool_dir: str = Field("data/tracking-spool", description="where a run keeps what it could not send while the "
                                                              "server was away (`lmforge tracking sync` sends it)")
    retry_seconds: float = Field(30.0, gt=0, description="while the server is away, ask it again this often")
    system_metrics_seconds: float | None = Field(
        10.0, gt=0, description="training runs log CPU, memory, disk and network use (GPU with pynvml) as system/* "
                                "metrics this often (MLflow's system metrics); null: not at all")


class ChecksConfig(_Strict):
    """Bounds of the data-quality checks run after each stage (Dagster asset checks; also
    ``lmforge check``). A failed blocking check stops the stages downstream of it."""

    clean_min_documents: int = Field(100, ge=1, description="documents the clean corpus must keep at least")
    clean_min_kept_fraction: float = Field(0.05, ge=0, le=1, description="documents kept / documents read, at least")
    clean_max_reason_fraction: float = Field(0.8, gt=0, le=1, description="no single drop reason removes more than this fraction of the documents read")
    quality_min_accuracy: float = Field(0.6, ge=0, le=1, description="the quality classifier's balanced accuracy on its held-out documents, at least (0.5 is chance); a warning")
    tokenizer_max_unknown_rate: float = Field(0.01, ge=0, le=1, description="subword tokenizers: unknown tokens per token on the validation split, at most")
    char_max_unknown_rate: float = Field(0.1, ge=0, le=1, description="ELMo's char tokenizer: words outside its output vocabulary, at most (its inputs are characters, never unknown)")
    mask_rate_tolerance: float = Field(0.02, gt=0, le=1, description="|realised - configured| mask / noise rate, at most")
    loss_min_drop: float = Field(0.0, ge=0, description="training loss: last logged below first by more than this (nats)")


class OrchestrateConfig(_Strict):
    """Dagster: the weekly retraining schedule, the new-input sensor, run limits."""

    retrain_cron: str = Field("0 3 * * 1", description="cron of the schedule that retrains the enabled architectures (Monday 03:00)")
    timezone: str = "UTC"
    sensor_interval_seconds: int = Field(60, ge=5, description="how often the sensor looks for new raw files")
    watch: list[str] | None = Field(None, description="folders the sensor watches for new raw files (null: the folders in clean.inputs)")
    max_runtime_hours: float = Field(24.0, gt=0, description="dagster/max_runtime of the training jobs")
    dvc_commit: bool = Field(True, description="record each materialized stage in dvc.lock (dvc commit)")
    training_process: Literal["auto", "subprocess", "in_process"] = Field(
        "auto", description="where Dagster runs a training stage: its own process through Pipes (subprocess), "
                            "the Dagster process (in_process: one process, no start-up per stage), or auto: "
                            "in_process when it trains in one process on the CPU, else subprocess")
    on_locked: Literal["fail", "wait"] = Field(
        "fail", description="a stage whose output another process is writing (<output>.lock): fail at once "
                            "naming the holder, or wait for it")
    executor: Literal["in_process", "multiprocess"] = Field(
        "in_process", description="how a Dagster run executes its steps: one after another in the run's process "
                                  "(in_process), or independent steps at once, each in a process of its own (multiprocess)")
    max_concurrent: int = Field(0, ge=0, description="multiprocess: steps running at once (0: one per CPU core)")
    training_slots: int = Field(
        0, ge=0, description="trainings running at once, each on a slot of its own (its GPUs: train.devices of them): "
                             "0 = as many as the visible GPUs hold, 1 on a machine without a GPU")
    trainings_per_gpu: int = Field(
        1, ge=1, description="trainings that may share one slot's GPUs at once (small models on a large GPU); "
                             "1: a GPU is never shared")


class Params(_Strict):
    """The root of ``params.yaml``."""

    clean: CleanConfig = CleanConfig()
    quality: QualityConfig = QualityConfig()
    split: SplitConfig = SplitConfig()
    tokenizer: TokenizerConfig = TokenizerConfig()
    tokenize: TokenizeConfig = TokenizeConfig()
    dataset: DatasetConfig = DatasetConfig()
    train: TrainConfig = TrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    evaluate: EvaluateConfig = EvaluateConfig()
    tracking: TrackingConfig = TrackingConfig()
    checks: ChecksConfig = ChecksConfig()
    orchestrate: OrchestrateConfig = OrchestrateConfig()
    executor: ExecutorConfig = ExecutorConfig()
    # ``--set <recipe file>:<key>=<value>`` (DVC's spelling of a value in another parameters file):
    # recipe values changed for one command, applied when the recipe is read. Never written to
    # or read from params.yaml; the recipe files hold the lasting values.
    recipe_overrides: dict[str, list[str]] = Field({}, exclude=True)


# ----------------------------------------------------------------------------- loading


def format_validation_error(source: str, exc: ValidationError, what: str = "configuration") -> str:
    """A validation error as one line that names each offending key
    (``params.yaml: invalid configuration: a.b: unknown key; c: ...``)."""
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        problems.append(f"{key}: {msg}")
    return f"{source}: invalid {what}: " + "; ".join(" ".join(p.split()) for p in problems)


def parse_params(data: dict[str, Any] | None, source: str = "params") -> Params:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(source, exc)) from None


def load_params(path: str | Path | None = "params.yaml", overrides: list[str] | None = None) -> Params:
    """Read and validate ``params.yaml``; a missing file means all defaults.

    ``overrides`` are ``dotted.key=value`` strings, the value parsed as YAML
    (``clean.rules.min_sentences=5``, ``clean.language.enabled=false``); ``<recipe file>:key=value``
    changes a recipe's value (``pipelines/gpt.yaml:sizes.tiny.pretrain.learning_rate=0.003``, as
    ``dvc exp run -S`` spells it), kept in ``recipe_overrides`` by architecture.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None and Path(path).exists():
        source = str(path)
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    elif path is not None and str(path) != "params.yaml":
        raise ConfigError(f"{path}: parameters file not found")
    if isinstance(data, dict) and "recipe_overrides" in data:
        raise ConfigError(f"{source}: recipe_overrides: unknown key (change a recipe in its file, or for one command "
                          "with --set <recipe file>:<key>=<value>)")
    recipe_items: dict[str, list[str]] = {}
    for item in overrides or []:
        target = item.split("=", 1)[0]
        if ":" in target:
            file, rest = item.split(":", 1)
            recipe_items.setdefault(Path(file.strip()).as_posix(), []).append(rest)
        else:
            apply_override(data, item)
    params = parse_params(data, source)
    if recipe_items:
        recipes = Path(params.train.recipes)
        for file, items in recipe_items.items():
            f = Path(file)
            if f.suffix != ".yaml" or f.parent != recipes or f.stem not in ARCHITECTURE_NAMES:
                raise ConfigError(f"override {file + ':' + items[0]!r}: {file} is not a recipe; recipes are "
                                  f"{(recipes / '<architecture>.yaml').as_posix()} (train.recipes), e.g. "
                                  f"{(recipes / 'gpt.yaml').as_posix()}:sizes.tiny.pretrain.learning_rate=0.003")
            for item in items:  # the same errors as a params.yaml key's, before anything runs
                try:
                    apply_override({}, item)
                except ConfigError as exc:
                    raise ConfigError(str(exc).replace(repr(item), repr(f"{file}:{item}"), 1)) from None
        params.recipe_overrides = {Path(file).stem: items for file, items in recipe_items.items()}
    return params


def apply_override(data: dict[str, Any], item: str) -> None:
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. clean.rules.min_sentences=5")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"override {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {item!r}: value is not valid YAML: {exc}") from None
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a mapping")
        node = child
    node[parts[-1]] = value
