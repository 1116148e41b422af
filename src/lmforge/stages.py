"""The stage graph: every stage of the pipeline with its inputs, outputs, parameters and the
function that runs it, built from ``params.yaml`` and the recipes in ``pipelines/``.

This is the one place the graph is declared. Its two views are derived from it:
``dvc.yaml`` (:func:`dvc_yaml`, written by ``lmforge dvc``) and the Dagster asset graph
(``dagster_project/``). Nothing here imports Dagster or DVC.

Stages and their names (letters, digits and ``_``: valid both as DVC stage names and as Dagster
asset names):

- ``clean`` -- the C4 rules over ``clean.inputs``
- ``tokenizer_<kind>`` -- one tokenizer per kind in ``tokenizer.kinds`` and per kind an enabled
  architecture needs
- ``tokens_<kind>`` -- the token store of each kind
- ``dataset_<objective>`` -- one per objective in ``dataset.objectives`` and per objective an
  enabled architecture's recipe names
- ``pretrain_<arch>`` -- one per architecture in ``train.architectures``
- ``finetune_<arch>_<task>`` -- one per architecture and task in ``finetune.tasks``
- ``evaluate_<arch>`` -- one per architecture
- ``report`` -- the leaderboard and charts (only when an architecture is enabled)
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from .config import ConfigError, Params, load_params

GROUPS = ("corpus", "tokenizers", "datasets", "pretraining", "finetuning", "evaluation")

# The library code each kind of stage runs (relative to the project root; used as DVC deps and
# as the Dagster code version where the project holds the source, i.e. a checkout of lmforge).
CODE = {
    "clean": ("src/lmforge/cleaning", "src/lmforge/corpus", "src/lmforge/resources"),
    "tokenizer": ("src/lmforge/tokenization",),
    "tokens": ("src/lmforge/tokenization", "src/lmforge/splits.py"),
    "dataset": ("src/lmforge/objectives",),
    "pretrain": ("src/lmforge/training", "src/lmforge/models", "src/lmforge/objectives", "src/lmforge/evaluation/intrinsic.py"),
    "finetune": ("src/lmforge/training", "src/lmforge/models", "src/lmforge/finetuning"),
    "evaluate": ("src/lmforge/evaluation/evaluate.py",),
    "report": ("src/lmforge/evaluation/report.py",),
}

Log = Callable[[str], None]


@dataclass(frozen=True)
class Output:
    """A path a stage writes; ``kind``: "out", "metrics" or "plots" (its section in ``dvc.yaml``).
    All are cached by DVC: data/ is git-ignored, so a file kept out of the cache would be nowhere."""

    path: str
    kind: str = "out"


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str                      # clean | tokenizer | tokens | dataset | pretrain | finetune | evaluate | report
    group: str                     # one of GROUPS
    description: str
    command: tuple[str, ...]       # the ``lmforge`` CLI arguments that run the stage
    upstream: tuple[str, ...]      # names of the stages whose outputs it reads
    deps: tuple[str, ...]          # paths it reads: upstream outputs, input files, recipes, code
    params: tuple[str, ...]        # dotted keys of params.yaml it depends on
    outputs: tuple[Output, ...]
    run: Callable[[Params, Log], Any] = field(compare=False, repr=False)
    subprocess: bool = False       # training: run as its own process (torchrun when devices > 1)
    key: dict[str, str] = field(default_factory=dict, compare=False)  # arch / kind / objective / task
    code: tuple[str, ...] = ()     # the source files and recipe among ``deps`` (the code version)

    @property
    def cli(self) -> str:
        return shlex.join(("lmforge", *self.command))

    @property
    def paths(self) -> list[str]:
        return [o.path for o in self.outputs]


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
        p = Path(path)
        full = p if p.is_absolute() else self.root / p
        full = Path(os.path.normpath(full))
        try:
            return full.relative_to(self.root).as_posix()
        except ValueError:
            return full.as_posix()


def build_stages(params: Params | None = None, root: str | os.PathLike = ".", params_path: str | os.PathLike | None = None) -> StageGraph:
    """The stage graph of the project at ``root`` for ``params`` (default: ``<root>/params.yaml``).

    Recipes are read for every enabled architecture (which objective and tokenizer it uses, how
    it fine-tunes); a missing or invalid recipe is a :class:`ConfigError` naming the file."""
    from .finetuning.tasks import DEFAULT_TASK
    from .objectives.registry import tokenizer_kind
    from .training.recipes import load_recipe

    root = Path(root).resolve()
    if params is None:
        params = load_params(params_path or root / "params.yaml")
    rel = _Paths(root)
    cwd = Path.cwd()
    try:  # params paths are relative to the project root, as the CLI runs there
        os.chdir(root)
        recipes = {arch: load_recipe(params, arch) for arch in params.train.architectures}
    finally:
        os.chdir(cwd)

    code = {kind: tuple(p for p in paths if (root / p).exists()) for kind, paths in CODE.items()}
    stages: dict[str, Stage] = {}

    def add(stage: Stage) -> None:
        recipe = [d for d in stage.deps if "arch" in stage.key and d == rel(Path(params.train.recipes) / f"{stage.key['arch']}.yaml")]
        stage = replace(stage, code=(*recipe, *code[stage.kind]))
        if stage.name in stages:
            raise ConfigError(f"two stages named {stage.name!r}; rename a task or an output")
        stages[stage.name] = stage

    # ------------------------------------------------------------------ corpus
    clean_out = rel(params.clean.output)
    local_inputs = [rel(i) for i in params.clean.inputs if i != "stdlib" and not i.startswith("hf:")]
    add(Stage(
        name="clean", kind="clean", group="corpus",
        description="The C4 rules, language ID, bad-words filter, line and near-duplicate dedup over clean.inputs; "
                    "Parquet shards, stats.json (counts, drop reasons) and samples of dropped documents.",
        command=("clean",), upstream=(), deps=(*local_inputs, *code["clean"]),
        params=("clean",), outputs=(Output(clean_out),),
        run=lambda p, log: _run_clean(p, log),
    ))

    # ------------------------------------------------------------------ tokenizers and token stores
    kinds = list(params.tokenizer.kinds)
    for arch, recipe in recipes.items():
        kind = tokenizer_kind(recipe.objective)
        if kind not in kinds:
            kinds.append(kind)
    tokenizer_input = rel(params.tokenizer.input) if params.tokenizer.input else clean_out
    for kind in kinds:
        add(Stage(
            name=f"tokenizer_{kind}", kind="tokenizer", group="tokenizers",
            description=f"The {kind} tokenizer trained on the clean corpus's train split; tokenizer.json that "
                        "transformers loads, metrics.json (tokens per word, bytes per token, unknown rate).",
            command=("tokenizer", "--kind", kind), upstream=("clean",) if tokenizer_input == clean_out else (),
            deps=(tokenizer_input, *code["tokenizer"]),
            params=("tokenizer.input", "tokenizer.max_training_documents", f"tokenizer.{kind}", "split"),
            outputs=(Output(rel(Path(params.tokenizer.output) / kind)),),
            run=lambda p, log, kind=kind: _run_tokenizer(p, kind, log), key={"kind": kind},
        ))
    store_kinds = list(params.tokenize.kinds or params.tokenizer.kinds)
    for kind in kinds:
        if kind not in store_kinds:
            store_kinds.append(kind)
    for kind in store_kinds:
        if f"tokenizer_{kind}" not in stages:
            raise ConfigError(f"tokenize.kinds: {kind!r} is not in tokenizer.kinds {params.tokenizer.kinds}")
        add(Stage(
            name=f"tokens_{kind}", kind="tokens", group="tokenizers",
            description=f"The clean corpus encoded with the {kind} tokenizer: memory-mapped token stores per split.",
            command=("tokenize", "--kind", kind), upstream=("clean", f"tokenizer_{kind}"),
            deps=(clean_out, rel(Path(params.tokenizer.output) / kind), *code["tokens"]),
            params=("tokenize.batch_size", "split"),
            outputs=(Output(rel(Path(params.tokenize.output) / kind)),),
            run=lambda p, log, kind=kind: _run_tokens(p, kind, log), key={"kind": kind},
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
            name=f"dataset_{objective}", kind="dataset", group="datasets",
            description=f"The {objective} objective over the {kind} token stores: stats.json (realised mask / noise "
                        "rates, span lengths, label balance, lengths); in static mode epoch 0's examples as Parquet.",
            command=("dataset", objective), upstream=(f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(Path(params.tokenize.output) / kind), rel(Path(params.tokenizer.output) / kind), *code["dataset"]),
            params=(f"dataset.{objective}", "dataset.mode", "dataset.seed", "dataset.statistics_examples"),
            outputs=(Output(rel(Path(params.dataset.output) / objective)),),
            run=lambda p, log, objective=objective: _run_dataset(p, objective, log), key={"objective": objective},
        ))

    # ------------------------------------------------------------------ training
    from .training.recipes import finetune_dir, task_slug

    for arch, recipe in recipes.items():
        kind = tokenizer_kind(recipe.objective)
        recipe_path = rel(Path(params.train.recipes) / f"{arch}.yaml")
        pre_out = rel(Path(params.train.output) / arch / "pretrain")
        add(Stage(
            name=f"pretrain_{arch}", kind="pretrain", group="pretraining",
            description=f"Pretrain {arch} ({recipe.objective} on {kind} tokens, recipe {recipe_path}) with Lightning; "
                        "checkpoints, the model (safetensors), history.csv, loss.png, metrics.json; an MLflow run.",
            command=("pretrain", arch),
            upstream=(f"dataset_{recipe.objective}", f"tokens_{kind}", f"tokenizer_{kind}"),
            deps=(rel(Path(params.dataset.output) / recipe.objective), rel(Path(params.tokenize.output) / kind),
                  rel(Path(params.tokenizer.output) / kind), recipe_path, *code["pretrain"]),
            params=(f"dataset.{recipe.objective}", "dataset.seed", "train.size", "train.seed", "train.precision",
                    "train.max_steps", "train.log_every", "evaluate.validation_batches"),
            outputs=(Output(pre_out),),
            run=lambda p, log, arch=arch: _run_pretrain(p, arch, log), subprocess=True,
            key={"arch": arch, "objective": recipe.objective, "kind": kind},
        ))
        finetuned = []
        for task in params.finetune.tasks:
            name = f"finetune_{arch}_{_slug(task_slug(task))}"
            task_deps: list[str] = []
            upstream = [f"pretrain_{arch}", f"tokenizer_{kind}"]
            if task == DEFAULT_TASK:
                task_deps.append(clean_out)
                upstream.append("clean")
            elif not task.startswith("hf:"):
                task_deps.append(rel(task))
            out = rel(finetune_dir(params, arch, task))
            finetuned.append((name, out))
            add(Stage(
                name=name, kind="finetune", group="finetuning",
                description=f"Fine-tune the pretrained {arch} on {task} ({recipe.finetune.mode}); model, history.csv, "
                            "metrics.json with test accuracy / macro-F1 and the majority and bag-of-words baselines.",
                command=("finetune", arch, "--task", task), upstream=tuple(upstream),
                deps=(pre_out, rel(Path(params.tokenizer.output) / kind), *task_deps, recipe_path, *code["finetune"]),
                params=("train.size", "train.seed", "train.finetune_max_steps", "train.log_every", "finetune.max_length",
                        "finetune.max_train_examples", "split"),
                outputs=(Output(out),),
                run=lambda p, log, arch=arch, task=task: _run_finetune(p, arch, task, log), subprocess=True,
                key={"arch": arch, "task": task},
            ))
        add(Stage(
            name=f"evaluate_{arch}", kind="evaluate", group="evaluation",
            description=f"Gather {arch}'s intrinsic (validation loss, bits per byte, unigram baseline) and downstream "
                        "results, log them to MLflow, move the registry's champion alias only on improvement.",
            command=("evaluate", arch), upstream=(f"pretrain_{arch}", *(n for n, _ in finetuned)),
            deps=(pre_out, *(o for _, o in finetuned), *code["evaluate"]),
            params=("finetune.tasks", "tracking.promotion_metric"),
            outputs=(Output(rel(Path(params.evaluate.output) / "evaluation" / f"{arch}.json")),),
            run=lambda p, log, arch=arch: _run_evaluate(p, arch, log), key={"arch": arch},
        ))

    if recipes:
        report = Path(params.evaluate.output)
        add(Stage(
            name="report", kind="report", group="evaluation",
            description="The leaderboard (CSV, Markdown, metrics.json) and charts: loss curves, bits per byte, "
                        "downstream accuracy against the baselines.",
            command=("report",), upstream=tuple(f"evaluate_{a}" for a in recipes),
            deps=tuple(rel(report / "evaluation" / f"{a}.json") for a in recipes) + code["report"],
            params=("train.architectures",),
            outputs=(Output(rel(report / "leaderboard.csv")), Output(rel(report / "leaderboard.md")),
                     # cached: data/ is git-ignored, so an uncached metrics file would be in neither git nor
                     # the cache, and `dvc exp show` / `dvc metrics diff` could not read it at other revisions
                     Output(rel(report / "metrics.json"), kind="metrics"),
                     Output(rel(report / "loss_curves.png"), kind="plots"),
                     Output(rel(report / "bits_per_byte.png"), kind="plots"),
                     Output(rel(report / "downstream.png"), kind="plots"),
                     Output(rel(report / "plots"))),
            run=lambda p, log: _run_report(p, log),
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


# ----------------------------------------------------------------------------- the functions each stage runs
# (the same ones the CLI commands call; Dagster's in-process assets call these)


def _run_clean(params: Params, log: Log) -> dict:
    from .cleaning.stage import run_clean

    result = run_clean(params.clean, log=log)
    return {"stats": result.stats, "seconds": result.seconds, "skipped": result.skipped}


def _run_tokenizer(params: Params, kind: str, log: Log) -> dict:
    from .tokenization.train import run_tokenizers

    return run_tokenizers(params, [kind], log=log)[kind]


def _run_tokens(params: Params, kind: str, log: Log) -> dict:
    from .tokenization.store import build_store

    return build_store(params, kind, log=log)


def _run_dataset(params: Params, objective: str, log: Log) -> dict:
    from .datasets.stage import build_dataset

    return build_dataset(params, objective, log=log)


def _run_pretrain(params: Params, arch: str, log: Log) -> dict:
    from .training.pretrain import run_pretrain

    return run_pretrain(params, arch, log=log)


def _run_finetune(params: Params, arch: str, task: str, log: Log) -> dict:
    from .training.finetune import run_finetune

    return run_finetune(params, arch, task, log=log)


def _run_evaluate(params: Params, arch: str, log: Log) -> dict:
    from .evaluation.evaluate import run_evaluate

    return run_evaluate(params, [arch], log=log)[arch]


def _run_report(params: Params, log: Log) -> dict:
    from .evaluation.report import load_evaluations, write_report

    evaluations = load_evaluations(f"{params.evaluate.output}/evaluation", order=params.train.architectures)
    result = write_report(evaluations, params.evaluate.output)
    return {"leaderboard": result["leaderboard"], "files": [str(f) for f in result["files"]]}


# ----------------------------------------------------------------------------- the DVC view

DVC_HEADER = """\
# Generated by `lmforge dvc` from params.yaml and pipelines/*.yaml (src/lmforge/stages.py).
# Do not edit by hand: change params.yaml or a recipe, then run `lmforge dvc` again.
# A test fails when this file is stale.
"""


def dvc_stages(graph: StageGraph) -> dict[str, Any]:
    """The ``dvc.yaml`` document of ``graph`` (a plain dict, ready for YAML)."""
    stages: dict[str, Any] = {}
    for s in graph:
        for path in s.paths:  # inputs may lie anywhere (DVC tracks them as external deps); outputs may not
            if Path(path).is_absolute():
                raise ConfigError(f"stage {s.name}: output {path} lies outside the project {graph.root}; DVC writes "
                                  "outputs inside it only (set the output paths in params.yaml relative to the project)")
        entry: dict[str, Any] = {"desc": s.description, "cmd": s.cli}
        if s.deps:
            entry["deps"] = list(s.deps)
        if s.params:
            entry["params"] = list(s.params)
        for section in ("outs", "metrics", "plots"):
            items = [o for o in s.outputs if {"outs": "out"}.get(section, section) == o.kind]
            if items:
                entry[section] = [o.path for o in items]
        stages[s.name] = entry
    doc: dict[str, Any] = {"stages": stages}
    if "report" in graph.stages:
        report = graph["report"]
        plots_dir = next(o.path for o in report.outputs if o.path.endswith("/plots") or o.path == "plots")
        archs = [s.key["arch"] for s in graph if s.kind == "pretrain"]
        doc["plots"] = [  # the stage's own PNG plots show as they are; this one draws the curves from the CSVs
            {"pretraining_loss": {"template": "linear", "x": "step", "x_label": "optimizer step",
                                  "y_label": "training loss (nats)", "title": "Pretraining loss",
                                  "y": {f"{plots_dir}/loss_{a}.csv": "train_loss" for a in archs}}},
        ]
    return doc


def missing_param_keys(graph: StageGraph, params_file: str | os.PathLike) -> list[str]:
    """The stages' parameter keys that ``params_file`` does not spell out. DVC reads each
    stage's parameters from the file itself (not from lmforge's defaults), so every key a stage
    names must be written there."""
    import yaml

    path = Path(params_file)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    missing = []
    for key in dict.fromkeys(k for s in graph for k in s.params):
        node = data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(key)
                break
            node = node[part]
    return missing


def dvc_yaml(graph: StageGraph) -> str:
    import yaml

    return DVC_HEADER + yaml.safe_dump(dvc_stages(graph), sort_keys=False, width=120, allow_unicode=True)


def write_dvc_yaml(root: str | os.PathLike = ".", params_path: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """Write ``<root>/dvc.yaml`` from the stage graph; returns (path, changed)."""
    graph = build_stages(root=root, params_path=params_path)
    params_file = Path(params_path) if params_path else Path(root) / "params.yaml"
    missing = missing_param_keys(graph, params_file)
    if missing:
        raise ConfigError(f"{params_file} does not spell out {', '.join(missing)}: DVC reads each stage's parameters "
                          "from the file, so write them there (the repository's params.yaml lists every default)")
    path = Path(root) / "dvc.yaml"
    text = dvc_yaml(graph)
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if old != text:
        tmp = path.with_name(".dvc.yaml.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path, old != text
