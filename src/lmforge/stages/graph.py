"""The stage graph: every stage of the pipeline with its inputs, outputs, parameters and kind,
built from ``params.yaml`` and the recipes in ``pipelines/``.

This is the one place the graph is declared. Its two views are derived from it: ``dvc.yaml``
(``stages/dvc.py``, written by ``lmforge dvc``) and the Dagster asset graph
(``dagster_project/``). What each kind of stage runs, prints, checks and shows is defined once
in ``stages/kinds/``.

Stage names (letters, digits and ``_``: valid as DVC stage and Dagster asset names):
``clean``; ``quality`` (only when ``quality.enabled``); ``tokenizer_<kind>`` and ``tokens_<kind>``
for each tokenizer kind configured or needed; ``dataset_<objective>``; ``pretrain_<arch>``,
``finetune_<arch>_<task>`` and ``evaluate_<arch>`` for each enabled architecture; ``report``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import layout
from ..config import ConfigError, Params, load_params
from .kind import Log
from .kinds import KINDS
from .metrics import metrics_path, write_stage_metrics


@dataclass(frozen=True)
class Output:
    """A path a stage writes; ``kind``: "out", "metrics" or "plots" (its section in ``dvc.yaml``).
    All are cached by DVC: data/ is git-ignored, so a file kept out of the cache would be nowhere."""

    path: str
    kind: str = "out"


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str                      # a key of stages.kinds.KINDS
    description: str
    command: tuple[str, ...]       # the ``lmforge`` CLI arguments that run the stage
    upstream: tuple[str, ...]      # names of the stages whose outputs it reads
    deps: tuple[str, ...]          # paths it reads: upstream outputs, input files, code
    params: tuple[str, ...]        # dotted keys of params.yaml it depends on
    outputs: tuple[Output, ...]
    key: dict[str, str] = field(default_factory=dict, compare=False)  # arch / kind / objective / task
    code: tuple[str, ...] = ()     # the recipe and the source files among ``deps`` (the code version)
    recipe: str = ""               # the recipe file it reads (training stages), a parameters file for DVC
    recipe_params: tuple[str, ...] = ()  # dotted keys of ``recipe`` it depends on

    def check_outputs(self, force: bool = False) -> None:
        """Refuse (``artifacts.UnsafeOutput``) outputs that would replace what the stage did not
        make: an output that is or holds one of its inputs, the project folder (the working
        folder: stages run from it), the home folder or the file system root; and, unless
        ``force``, a main output folder that is not empty and holds no finished record of the
        stage (its kind's ``record``). A stage that writes files rather than a folder has the
        folder they go in checked against the project, home and root folders too."""
        from ..artifacts import check_output

        record = KINDS[self.kind].record
        for i, output in enumerate(self.outputs):
            check_output(output.path, inputs=self.deps, record=record if i == 0 else None, force=force,
                         what=f"{self.name} output")
        if record is None:
            check_output(self.output_path.parent, what=f"{self.name} output folder")

    def run(self, params: Params, log: Log, *, force: bool = False) -> dict:
        """Run the stage (the library function its kind names), from the project folder, holding
        the lock on its main output (``locks.output_lock``: one writer per output), once its
        outputs are known to replace only what it made (:meth:`check_outputs`; ``force``
        allows replacing a folder of other files)."""
        from ..locks import output_lock

        self.check_outputs(force)
        with output_lock(self.output_path, wait=params.orchestrate.on_locked == "wait",
                         command=f"{self.name}: {shlex.join(sys.argv)}", log=log):
            result = KINDS[self.kind].run(params, self, log)
            write_stage_metrics(self.kind, self.output_under("."))
            return result

    def summary(self, result: dict) -> str:
        """What the command line prints after the stage ran."""
        summarize = KINDS[self.kind].summary
        return summarize(self, result) if summarize else f"{self.name}: done"

    @property
    def group(self) -> str:
        """The kind's group; a fine-tuning on a task of another family than classification is in
        that family's (``finetuning_tagging``, ``finetuning_span_qa``, ...)."""
        family = self.key.get("family")
        base = KINDS[self.kind].group
        return f"{base}_{family}" if family and family != "classification" else base

    @property
    def subprocess(self) -> bool:
        """Training: run as its own process (torchrun when devices > 1)."""
        return KINDS[self.kind].subprocess

    @property
    def cli(self) -> str:
        return shlex.join(("lmforge", *self.command))

    @property
    def paths(self) -> list[str]:
        return [o.path for o in self.outputs]

    @property
    def output_path(self) -> Path:
        """The stage's main output (the first), as the graph names it."""
        return Path(self.outputs[0].path)

    def output_under(self, root: str | os.PathLike) -> Path:
        """The main output, resolved against the project folder ``root``."""
        out = self.output_path
        return out if out.is_absolute() else Path(root) / out


@dataclass
class StageGraph:
    params: Params
    root: Path
    stages: dict[str, Stage]

    def __iter__(self):
        return iter(self.stages.values())

    def __getitem__(self, name: str) -> Stage:
        try:
            return self.stages[name]
        except KeyError:
            raise KeyError(f"no stage {name!r}; stages: {', '.join(self.stages)}") from None

    def __len__(self) -> int:
        return len(self.stages)

    def of_kind(self, kind: str) -> list[Stage]:
        return [s for s in self if s.kind == kind]

    def edges(self) -> set[tuple[str, str]]:
        return {(up, s.name) for s in self for up in s.upstream}

    def code_version(self, stage: Stage) -> str:
        """A short hash of the code and recipe files the stage runs (what Dagster shows as the
        asset's code version): it changes when they change."""
        h = hashlib.sha256(stage.kind.encode())
        for dep in stage.code:
            p = self.root / dep
            files = sorted(q for q in p.rglob("*") if q.is_file() and _is_source(q)) if p.is_dir() else [p]
            for f in files:
                if f.exists():
                    h.update(f.relative_to(self.root).as_posix().encode())
                    h.update(f.read_bytes())
        return h.hexdigest()[:12]


def _is_source(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "task"


class _Paths:
    """Paths as the stage graph writes them: relative to the project root where they lie inside
    it (DVC needs that), absolute otherwise."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def __call__(self, path: str | os.PathLike) -> str:
        full = self._full(path)
        try:
            return full.relative_to(self.root).as_posix()
        except ValueError:
            return full.as_posix()

    def _full(self, path: str | os.PathLike) -> Path:
        p = Path(path)
        return Path(os.path.normpath(p if p.is_absolute() else self.root / p))

    def output(self, path: str | os.PathLike, what: str) -> str:
        """An output folder's path; ``UnsafeOutput`` when it is or holds the project folder, the
        home folder or the file system root (no stage may replace those)."""
        from ..artifacts import check_output

        check_output(self._full(path), root=self.root, what=what)
        return self(path)


def build_stages(params: Params | None = None, root: str | os.PathLike = ".", params_path: str | os.PathLike | None = None) -> StageGraph:
    """The stage graph of the project at ``root`` for ``params`` (default: ``<root>/params.yaml``).

    Recipes are read for every enabled architecture (which objective and tokenizer it uses, how
    it fine-tunes); a missing or invalid recipe is a :class:`ConfigError` naming the file. Paths
    in ``params`` are relative to ``root``."""
    from ..finetuning.generation_features import fits_family
    from ..finetuning.tasks import CORPUS_TASKS
    from ..finetuning.tasks.load import task_family
    from ..objectives.registry import tokenizer_kind
    from ..training.recipes import load_recipe, recipe_param_keys, recipe_path

    root = Path(root).resolve()
    if params is None:
        params = load_params(params_path or root / "params.yaml")
    rel = _Paths(root)
    recipes = {arch: load_recipe(params, arch, root=root) for arch in params.train.architectures}
    # each task's family, read once (a folder's from its files): which architectures fit it
    families = {task: task_family(task if task in CORPUS_TASKS or task.startswith("hf:") or Path(task).is_absolute()
                                  else str(root / task)) for task in params.finetune.tasks}
    code = {name: tuple(p for p in kind.code if (root / p).exists()) for name, kind in KINDS.items()}
    stages: dict[str, Stage] = {}

    def add(stage: Stage) -> None:
        recipe = (stage.recipe,) if stage.recipe else ()
        stage = replace(stage, code=(*recipe, *code[stage.kind]), deps=(*stage.deps, *code[stage.kind]))
        if stage.name in stages:
            raise ConfigError(f"two stages named {stage.name!r}; rename a task or an output")
        stages[stage.name] = stage

    # ------------------------------------------------------------------ corpus
    clean_out = rel.output(layout.clean_dir(params), "clean.output")
    local_inputs = [rel(i) for i in params.clean.inputs if i != "stdlib" and not i.startswith("hf:")]
    # earlier clean outputs whose documents the run drops (their saved signatures are read)
    local_inputs += [rel(p) for p in params.clean.near_dedup.against]
    clean_params: tuple[str, ...] = ("clean",)
    decon = params.clean.decontaminate
    if decon.enabled:  # the evaluation texts: the held-out split, the tasks, the listed files and folders
        clean_params += ("split", "finetune.tasks")
        evaluation = [*(params.finetune.tasks if decon.tasks else []), *decon.texts]
        local_inputs += [rel(t) for t in evaluation if t not in CORPUS_TASKS and not t.startswith("hf:")]
    add(Stage(
        name="clean", kind="clean",
        description="The C4 rules, language ID, bad-words filter, line and near-duplicate dedup over clean.inputs, "
                    "then decontamination against the evaluation texts; Parquet shards, stats.json (counts, drop "
                    "reasons), decontamination.json and samples of dropped documents.",
        command=("clean",), upstream=(), deps=tuple(dict.fromkeys(local_inputs)),
        params=clean_params, outputs=(Output(clean_out), Output(rel(metrics_path(clean_out)), kind="metrics")),
    ))

    # the optional quality filter: when enabled, the stages after it read its output instead of clean's
    quality_out = None
    if params.quality.enabled:
        quality_out = rel.output(layout.quality_dir(params), "quality.output")
        reference_inputs = [rel(i) for i in params.quality.reference if i != "stdlib" and not i.startswith("hf:")
                            and "://" not in i]
        add(Stage(
            name="quality", kind="quality",
            description="A classifier (hashed word 1-2 grams, logistic regression: fastText's model family) trained on "
                        "quality.reference against the clean corpus scores each clean document; the top "
                        "quality.keep_fraction are kept as Parquet shards with their scores, beside the model, its "
                        "held-out accuracy and AUC, and samples of kept and dropped documents.",
            command=("quality",), upstream=("clean",), deps=(clean_out, *reference_inputs),
            params=("quality",), outputs=(Output(quality_out), Output(rel(metrics_path(quality_out)), kind="metrics")),
        ))

    # ------------------------------------------------------------------ tokenizers and token stores
    kinds = list(params.tokenizer.kinds)
    for recipe in recipes.values():
        kind = tokenizer_kind(recipe.objective)
        if kind not in kinds:
            kinds.append(kind)
    corpus = rel(layout.corpus_dir(params))
    # the stage that writes the corpus the later stages read (none: tokenizer.input names another folder)
    corpus_stage = "quality" if corpus == quality_out else "clean" if corpus == clean_out else None
    for kind in kinds:
        add(Stage(
            name=f"tokenizer_{kind}", kind="tokenizer",
            description=f"The {kind} tokenizer trained on the clean corpus's train split; tokenizer.json that "
                        "transformers loads, metrics.json (tokens per word, bytes per token, unknown rate).",
            command=("tokenizer", "--kind", kind), upstream=(corpus_stage,) if corpus_stage else (),
            deps=(corpus,),
            params=("tokenizer.input", "tokenizer.max_training_documents", f"tokenizer.{kind}", "split"),
            outputs=(Output(rel.output(layout.tokenizer_dir(params, kind), "tokenizer.output")),
                     Output(rel(metrics_path(layout.tokenizer_dir(params, kind))), kind="metrics")), key={"kind": kind},
        ))
    store_kinds = list(params.tokenize.kinds or params.tokenizer.kinds)
    for kind in kinds:
        if kind not in store_kinds:
            store_kinds.append(kind)
    for kind in store_kinds:
        if f"tokenizer_{kind}" not in stages:
            raise ConfigError(f"tokenize.kinds: {kind!r} is not in tokenizer.kinds {params.tokenizer.kinds}")
        add(Stage(
            name=f"tokens_{kind}", kind="tokens",
            description=f"The clean corpus encoded with the {kind} tokenizer: memory-mapped token stores per split.",
            command=("tokenize", "--kind", kind), upstream=(corpus_stage or "clean", f"tokenizer_{kind}"),
            deps=(corpus, rel(layout.tokenizer_dir(params, kind))),
            params=("tokenize.batch_size", "tokenize.mixture", "tokenize.mixture_seed", "split"),
            outputs=(Output(rel.output(layout.token_store_dir(params, kind), "tokenize.output")),
                     Output(rel(metrics_path(layout.token_store_dir(params, kind))), kind="metrics")), key={"kind": kind},
        ))

    # ------------------------------------------------------------------ objective datasets
    objectives = list(params.dataset.objectives)
    for recipe in recipes.values():
        if recipe.objective not in objectives:
            objectives.append(recipe.objective)
    for objective in objectives:
        kind = tokenizer_kind(objective)
        if f"tokens_{kind}" not in stages:
            raise ConfigError(f"dataset.objectives: {objective!r} reads {kind} tokens, but {kind!r} is not in tokenizer.kinds")
        add(Stage(
            name=f"dataset_{objective}", kind="dataset",
            description=f"The {objective} objective over the {kind} token stores: stats.json (realised mask / noise "
                        "rates, span lengths, label balance, lengths); in static mode epoch 0's examples as Parquet.",
            command=("dataset", objective), upstream=(f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(layout.token_store_dir(params, kind)), rel(layout.tokenizer_dir(params, kind))),
            params=(f"dataset.{objective}", "dataset.mode", "dataset.seed", "dataset.statistics_examples"),
            outputs=(Output(rel.output(layout.dataset_dir(params, objective), "dataset.output")),
                     Output(rel(metrics_path(layout.dataset_dir(params, objective))), kind="metrics")),
            key={"objective": objective},
        ))

    # ------------------------------------------------------------------ training
    for arch, recipe in recipes.items():
        kind = tokenizer_kind(recipe.objective)
        recipe_file = rel(recipe_path(params, arch))
        tokenizer_out = rel(layout.tokenizer_dir(params, kind))
        pre_out = rel.output(layout.pretrain_dir(params, arch), "train.output")
        add(Stage(
            name=f"pretrain_{arch}", kind="pretrain",
            description=f"Pretrain {arch} ({recipe.objective} on {kind} tokens, recipe {recipe_file}) with Lightning; "
                        "the model (safetensors), history.csv, loss.png, metrics.json (the checkpoints stay in the "
                        "attempt folder beside it); an MLflow run.",
            command=("pretrain", arch),
            upstream=(f"dataset_{recipe.objective}", f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(layout.dataset_dir(params, recipe.objective)), rel(layout.token_store_dir(params, kind)),
                  tokenizer_out),
            params=(f"dataset.{recipe.objective}", "dataset.seed", "train.size", "train.seed", "train.precision",
                    "train.max_steps", "train.log_every", "evaluate.validation_batches"),
            outputs=(Output(pre_out),),
            key={"arch": arch, "objective": recipe.objective, "kind": kind},
            recipe=recipe_file, recipe_params=tuple(recipe_param_keys(params, arch, "pretrain", root)),
        ))
        finetuned = []
        finetune_recipe = tuple(recipe_param_keys(params, arch, "finetune", root))
        for task in params.finetune.tasks:
            family = families[task]
            if not fits_family(arch, family):  # e.g. an encoder on a generation task: no stage
                continue
            task_deps: list[str] = []
            task_upstream = [f"tokenizer_{kind}"]
            if task in CORPUS_TASKS:  # the corpus tasks read the corpus the tokenizers read
                task_deps.append(corpus if corpus_stage == "quality" else clean_out)
                task_upstream.append("quality" if corpus_stage == "quality" else "clean")
            elif not task.startswith("hf:"):
                task_deps.append(rel(task))
            augmenter = recipe.finetune.augment.model if recipe.finetune.augment else None
            if augmenter is not None:  # the masked LM that makes augmented examples is an input of both arms
                task_deps.append(rel(layout.pretrain_dir(params, augmenter)))
                if augmenter in params.train.architectures:
                    task_upstream.append(f"pretrain_{augmenter}")
            family_key = {"family": family} if family != "classification" else {}  # the group it shows in
            finetune_params = ("train.size", "train.seed", "train.finetune_max_steps", "train.log_every",
                               "finetune.max_length", "finetune.max_train_examples", "split")
            name = f"finetune_{arch}_{_slug(layout.task_slug(task))}"
            out = rel.output(layout.finetune_dir(params, arch, task), "train.output")
            finetuned.append((name, out))
            add(Stage(
                name=name, kind="finetune",
                description=f"Fine-tune the pretrained {arch} on {task} ({recipe.finetune.mode if family == 'classification' else family}); "
                            "model, history.csv, metrics.json with the test scores of the task's family and its "
                            "baselines.",
                command=("finetune", arch, "--task", task),
                upstream=tuple(dict.fromkeys((f"pretrain_{arch}", *task_upstream))),
                deps=tuple(dict.fromkeys((pre_out, tokenizer_out, *task_deps))), params=finetune_params,
                outputs=(Output(out),), key={"arch": arch, "task": task, "init": "pretrained", **family_key},
                recipe=recipe_file, recipe_params=finetune_recipe,
            ))
            if params.finetune.scratch_control:
                name = f"finetune_scratch_{arch}_{_slug(layout.task_slug(task))}"
                out = rel.output(layout.finetune_scratch_dir(params, arch, task), "train.output")
                finetuned.append((name, out))
                add(Stage(
                    name=name, kind="finetune",
                    description=f"The control: {arch} randomly initialised, fine-tuned on {task} with the same recipe "
                                "and budget as the pretrained one; what pretraining is worth is the difference.",
                    command=("finetune", arch, "--task", task, "--from-scratch"), upstream=tuple(task_upstream),
                    deps=(tokenizer_out, *task_deps), params=finetune_params,
                    outputs=(Output(out),), key={"arch": arch, "task": task, "init": "scratch", **family_key},
                    recipe=recipe_file, recipe_params=finetune_recipe,
                ))
        # the zero-shot harness: the built-in task reads the corpus's held-out documents, a YAML task its file
        harness_deps = tuple(rel(t) for t in params.evaluate.harness if t.endswith((".yaml", ".yml")))
        harness_upstream: tuple[str, ...] = ()
        if "docstring_next" in params.evaluate.harness:
            harness_deps = (corpus, *harness_deps)
            harness_upstream = (corpus_stage,) if corpus_stage else ()
        harness_params = ("evaluate.harness", "evaluate.harness_questions", "train.seed") if params.evaluate.harness else ()
        add(Stage(
            name=f"evaluate_{arch}", kind="evaluate",
            description=f"Gather {arch}'s intrinsic (validation loss, bits per byte, unigram baseline) and downstream "
                        "results, log them to MLflow, move the registry's champion alias only on improvement.",
            command=("evaluate", arch), upstream=(f"pretrain_{arch}", *(n for n, _ in finetuned), *harness_upstream),
            deps=(pre_out, *(o for _, o in finetuned), *harness_deps),
            params=("finetune.tasks", "finetune.scratch_control", "tracking.promotion_metric", *harness_params),
            outputs=(Output(rel(layout.evaluation_file(params, arch))),),
            key={"arch": arch},
        ))

    if recipes:
        report = layout.report_dir(params)
        rel.output(report, "evaluate.output")
        add(Stage(
            name="report", kind="report",
            description="The leaderboard (CSV, Markdown, metrics.json) and charts: loss curves, bits per byte, "
                        "downstream accuracy against the baselines.",
            command=("report",), upstream=tuple(f"evaluate_{a}" for a in recipes),
            deps=tuple(rel(layout.evaluation_file(params, a)) for a in recipes),
            params=("train.architectures",),
            outputs=(Output(rel(report / "leaderboard.csv")), Output(rel(report / "leaderboard.md")),
                     # cached: data/ is git-ignored, so an uncached metrics file would be in neither git nor
                     # the cache, and `dvc exp show` / `dvc metrics diff` could not read it at other revisions
                     Output(rel(report / "metrics.json"), kind="metrics"),
                     Output(rel(report / "loss_curves.png"), kind="plots"),
                     Output(rel(report / "bits_per_byte.png"), kind="plots"),
                     Output(rel(report / "downstream.png"), kind="plots"),
                     Output(rel(report / "plots"))),
        ))
    graph = StageGraph(params=params, root=root, stages=stages)
    _check_graph(graph)
    return graph


def _check_graph(graph: StageGraph) -> None:
    """Every upstream exists; no two stages write overlapping paths (DVC refuses that too)."""
    owner: dict[str, str] = {}
    for s in graph:
        for u in s.upstream:
            if u not in graph.stages:
                raise ConfigError(f"stage {s.name} reads from {u!r}, which is not a stage")
        for path in s.paths:
            for other, name in owner.items():
                if path == other or path.startswith(other.rstrip("/") + "/") or other.startswith(path.rstrip("/") + "/"):
                    raise ConfigError(f"stages {name} and {s.name} both write {other if len(other) < len(path) else path}; "
                                      "give them separate output paths in params.yaml")
            owner[path] = s.name
