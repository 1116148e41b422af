"""Benchmark: what pretraining is worth. Each architecture fine-tuned from its pretrained model
against the same architecture trained from scratch with the same recipe and budget, beside the
task's trivial baselines (majority class, bag of words).

    python benchmarks/transfer.py [--project DIR] [--params params.yaml] [--arch A ...]
        [--task T ...] [--seeds 0 1 2] [--set KEY=VALUE ...] [--pretrain] [--out DIR] [--json OUT]

    PYTHONPATH=src python3 benchmarks/transfer.py --project . --seeds 0 1 2
    python benchmarks/transfer.py --arch gpt bert --task data/tasks/sentiment --set train.finetune_max_steps=50

Defaults: the project's ``train.architectures`` and ``finetune.tasks``, seed 0. A task is
``docstring_kind``, ``docstring_package``, ``hf:NAME[/CONFIG]`` or a folder of train/validation/test ``.csv`` (columns
``text,label``), ``.tsv`` or ``.jsonl``: a task the project has never seen.

For every (architecture, task, seed) ``run_finetune`` runs twice, pretrained and from scratch,
with ``train.seed=<seed>`` and the ``--set`` overrides (``tracking.enabled=false`` and
``tracking.register_models=false`` unless they set them: a benchmark run is never a candidate).
The runs write under ``--out`` (default ``<project>/benchmarks/results/transfer``), in
``seed-<s>/<arch>/<task>[-scratch]/``, where ``<arch>/pretrain`` is a symlink to the project's
pretrained model: the pipeline's own ``models/`` are read, never written. A finished run is
reused (the pipeline's fingerprint, with the seconds it took then), so a second call only
prints the table again. With ``--pretrain`` a missing pretrained model is pretrained first, into
the project's ``train.output`` (``lmforge pretrain <arch>``); without it, a missing one is an
error.

The table (Markdown, on stdout; the runs' logs go to stderr): test accuracy in percent, the
mean ± the sample standard deviation over seeds when there is more than one; the gain is
pretrained minus scratch, per seed, in points. "pays" when the mean gain exceeds both 3 points
and the standard deviation of the per-seed gains (with one seed there is no spread: only the
3 points count). The baselines are the same split's, averaged over seeds (the task's samples
are drawn with the seed). Then one line per task: how many architectures beat the majority
class by at least 5 points, reach bag of words, and show a gain that pays. ``--json OUT``
writes every per-seed number.

Run it from anywhere: the runs happen in the project folder (paths in params are relative to
it); ``--params``, ``--out``, ``--json`` and task folders are taken relative to the current
folder (a task folder not found there is looked for in the project). Errors in the arguments
or the configuration are one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

MIN_GAIN = 3.0           # points a transfer gain must exceed (also the seed spread) to pay
MAJORITY_MARGIN = 5.0    # points above the majority class that count as learning the task


class UsageError(Exception):
    """A bad argument or configuration: printed as one line, exit status 2."""


# ----------------------------------------------------------------------------- arithmetic


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    """(mean, sample standard deviation); the deviation is None for fewer than two values."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def pm(values: list[float], signed: bool = False) -> str:
    """``71.2 ± 1.3`` (``71.2`` for one value); ``signed`` puts ``+`` on a positive mean."""
    mean, sd = mean_sd(values)
    text = f"{mean:+.1f}" if signed else f"{mean:.1f}"
    return text if sd is None else f"{text} ± {sd:.1f}"


def summarize(runs: list[dict]) -> list[dict]:
    """One row per (architecture, task), in first-seen order, from the per-seed records of
    :func:`record` (accuracies as fractions; the row's numbers in percent / points)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["architecture"], run["task"]), []).append(run)
    rows = []
    for (arch, task), group in groups.items():
        pct = lambda init, key: [100 * r[init][key] for r in group]  # noqa: E731
        gains = [100 * (r["pretrained"]["accuracy"] - r["scratch"]["accuracy"]) for r in group]
        gain, spread = mean_sd(gains)
        rows.append({
            "architecture": arch, "task": task, "seeds": [r["seed"] for r in group],
            "majority": statistics.fmean(100 * r["majority"] for r in group),
            "bag_of_words": statistics.fmean(100 * r["bag_of_words"] for r in group),
            "pretrained": pct("pretrained", "accuracy"), "scratch": pct("scratch", "accuracy"),
            "pretrained_f1": pct("pretrained", "macro_f1"), "scratch_f1": pct("scratch", "macro_f1"),
            "gains": gains, "gain": gain, "gain_sd": spread,
            "pays": gain > MIN_GAIN and gain > (spread or 0.0),
            "best_step": (statistics.fmean(r["pretrained"]["best_step"] for r in group),
                          statistics.fmean(r["scratch"]["best_step"] for r in group)),
            "steps": (statistics.fmean(r["pretrained"]["steps"] for r in group),
                      statistics.fmean(r["scratch"]["steps"] for r in group)),
            "seconds": (statistics.fmean(r["pretrained"]["seconds"] for r in group),
                        statistics.fmean(r["scratch"]["seconds"] for r in group)),
        })
    return rows


def format_table(rows: list[dict]) -> str:
    """The Markdown table of :func:`summarize`'s rows."""
    head = ["architecture", "task", "majority", "bag of words", "pretrained acc.", "scratch acc.", "gain (points)",
            "pays", "pretrained F1", "scratch F1", "best step (pre / scratch of steps)", "seconds (pre / scratch)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * 5 + ":---:|" + "---:|" * 4]
    for r in rows:
        best = f"{r['best_step'][0]:.0f} / {r['best_step'][1]:.0f} of {r['steps'][0]:.0f}"
        if round(r["steps"][0]) != round(r["steps"][1]):
            best += f" / {r['steps'][1]:.0f}"
        cells = [r["architecture"], r["task"], f"{r['majority']:.1f}", f"{r['bag_of_words']:.1f}", pm(r["pretrained"]),
                 pm(r["scratch"]), pm(r["gains"], signed=True), "yes" if r["pays"] else "no", pm(r["pretrained_f1"]),
                 pm(r["scratch_f1"]), best, f"{r['seconds'][0]:.0f} / {r['seconds'][1]:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_lines(rows: list[dict]) -> list[str]:
    """Per task: architectures beating the majority by >= 5 points, reaching bag of words, paying."""
    out = []
    for task in dict.fromkeys(r["task"] for r in rows):
        group = [r for r in rows if r["task"] == task]
        n = len(group)
        beat = sum(statistics.fmean(r["pretrained"]) >= r["majority"] + MAJORITY_MARGIN for r in group)
        bow = sum(statistics.fmean(r["pretrained"]) >= r["bag_of_words"] for r in group)
        pays = sum(r["pays"] for r in group)
        out.append(f"{task}: fine-tuned from pretraining, {beat}/{n} architectures beat the majority class by >= "
                   f"{MAJORITY_MARGIN:g} points and {bow}/{n} reach bag of words; "
                   f"{pays}/{n} show a transfer gain that pays")
    return out


def record(arch: str, task: str, seed: int, pretrained: dict, scratch: dict) -> dict:
    """The per-seed numbers of one (architecture, task, seed) from the two ``metrics.json``."""
    def numbers(m: dict) -> dict:
        return {"accuracy": m["test"]["accuracy"], "macro_f1": m["test"]["macro_f1"],
                "validation_accuracy": m["validation"]["accuracy"], "validation_macro_f1": m["validation"]["macro_f1"],
                "best_step": m["best_step"], "steps": m["steps"], "seconds": m["seconds"]}
    return {"architecture": arch, "task": task, "seed": seed, "pretrained": numbers(pretrained),
            "scratch": numbers(scratch), "majority": pretrained["baselines"]["majority"]["accuracy"],
            "bag_of_words": pretrained["baselines"]["bag_of_words"]["accuracy"],
            "gain": pretrained["test"]["accuracy"] - scratch["test"]["accuracy"]}


# ----------------------------------------------------------------------------- the runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", default=".", help="the project folder (default: the current one)")
    parser.add_argument("--params", help="parameters file (default: <project>/params.yaml)")
    parser.add_argument("--arch", nargs="+", help="architectures (default: train.architectures)")
    parser.add_argument("--task", nargs="+", help="tasks: names, hf:NAME, or folders (default: finetune.tasks)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="fine-tuning seeds (default: 0)")
    parser.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="params overrides, e.g. train.finetune_max_steps=50")
    parser.add_argument("--pretrain", action="store_true", help="pretrain an architecture whose model is missing")
    parser.add_argument("--out", help="where the runs write (default: <project>/benchmarks/results/transfer)")
    parser.add_argument("--json", help="write every per-seed number to this file")
    args = parser.parse_args(argv)
    if any(s < 0 for s in args.seeds):
        parser.error("--seeds: a seed is a non-negative integer")
    if len(set(args.seeds)) != len(args.seeds):
        parser.error("--seeds: a seed is given twice")
    return args


def resolve_task(spec: str, project: Path) -> str:
    """A task folder as an absolute path (from the current folder, else the project); names and
    ``hf:`` specs as they are."""
    from lmforge.finetuning.tasks import CORPUS_TASKS

    if spec in CORPUS_TASKS or spec.startswith("hf:"):
        return spec
    for base in (Path.cwd(), project):
        path = (base / spec).expanduser()
        if path.is_dir():
            return str(path.resolve())
        if path.exists():
            raise UsageError(f"task {spec!r}: {path} is a file; a task is a folder of train/validation/test files")
    if "/" not in spec and "\\" not in spec and not spec.startswith("."):
        raise UsageError(f"unknown task {spec!r}; a task is one of {sorted(CORPUS_TASKS)}, hf:NAME[/CONFIG], or a folder of "
                         "train/validation/test .csv/.tsv/.jsonl files")
    raise UsageError(f"task {spec!r}: no such folder (looked in {Path.cwd()} and {project})")


def link_pretrained(pretrained: Path, out: Path, arch: str) -> None:
    """Make ``<out>/<arch>/pretrain`` a symlink to the project's ``pretrained`` folder."""
    link = out / arch / "pretrain"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        if link.resolve() == pretrained.resolve():
            return
        link.unlink()
    elif link.exists():
        raise UsageError(f"{link} exists and is not a symlink; choose another --out")
    link.symlink_to(pretrained.resolve(), target_is_directory=True)


def with_values(params, **train):
    """A copy of ``params`` with ``train.<key>`` set (validated like params.yaml)."""
    from lmforge.config import parse_params

    data = params.model_dump(mode="json")
    data["train"].update(train)
    return parse_params(data, "benchmark")


def run(args: argparse.Namespace) -> int:
    from lmforge import layout
    from lmforge.config import load_params
    from lmforge.models.registry import ARCHITECTURES

    project = Path(args.project).expanduser().resolve()
    if not project.is_dir():
        raise UsageError(f"--project {args.project}: no such folder")
    params_path = Path(args.params).expanduser().resolve() if args.params else project / "params.yaml"
    if args.params and not params_path.exists():
        raise UsageError(f"--params {args.params}: no such file")
    out_root = Path(args.out).expanduser().resolve() if args.out else project / "benchmarks" / "results" / "transfer"
    json_path = Path(args.json).expanduser().resolve() if args.json else None
    overrides = list(args.overrides)
    for key in ("tracking.enabled", "tracking.register_models"):  # off unless the user turns them on
        if not any(o.split("=", 1)[0].strip() == key for o in overrides):
            overrides.append(f"{key}=false")
    base = load_params(params_path if params_path.exists() else None, overrides)  # none: the defaults, as lmforge

    archs = args.arch or list(base.train.architectures)
    unknown = [a for a in archs if a not in ARCHITECTURES]
    if unknown:
        raise UsageError(f"unknown architecture(s) {', '.join(unknown)}; known: {', '.join(ARCHITECTURES)}")
    tasks = [resolve_task(t, project) for t in (args.task or base.finetune.tasks)]

    os.chdir(project)
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    pretrained = {a: (project / layout.pretrain_dir(base, a)) for a in archs}
    missing = [a for a in archs if not (pretrained[a] / "model" / "model.safetensors").exists()]
    if missing and not args.pretrain:
        todo = " && ".join(f"lmforge pretrain {a}" for a in missing)
        raise UsageError(f"no pretrained model for {', '.join(missing)} in {project / base.train.output}; "
                         f"run `{todo}` in {project}, or pass --pretrain")
    if out_root in [(project / base.train.output).resolve(), *(p.resolve() for p in pretrained.values())]:
        raise UsageError(f"--out {out_root} is the project's train.output; the benchmark writes elsewhere")
    for arch in missing:
        from lmforge.training.pretrain import run_pretrain

        say(f"== pretrain {arch} (into {pretrained[arch]})")
        run_pretrain(base, arch, log=say)

    runs = []
    for seed in args.seeds:
        out = out_root / f"seed-{seed}"
        params = with_values(base, seed=seed, output=str(out))
        for arch in archs:
            link_pretrained(pretrained[arch], out, arch)
            for task in tasks:
                runs.append(finetune_pair(params, arch, task, seed, say))
    rows = summarize(runs)
    print(format_table(rows))
    print()
    for line in summary_lines(rows):
        print(line)
    if len(args.seeds) == 1:
        print(f"(one seed: no spread; a gain pays when it exceeds {MIN_GAIN:g} points)")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"project": str(project), "params": str(params_path), "seeds": args.seeds,
                                         "overrides": overrides, "output": str(out_root), "runs": runs,
                                         "rows": rows}, indent=2) + "\n", encoding="utf-8")
        say(f"wrote {json_path}")
    return 0


def finetune_pair(params, arch: str, task: str, seed: int, say) -> dict:
    """Fine-tune ``arch`` on ``task`` pretrained and from scratch; the per-seed record."""
    from lmforge.training.finetune import run_finetune

    metrics = {}
    for init in ("pretrained", "scratch"):
        say(f"== {arch} / {task} / seed {seed}: {init}")
        metrics[init] = run_finetune(params, arch, task, from_scratch=init == "scratch", log=say)
    return record(arch, metrics["pretrained"]["task"], seed, metrics["pretrained"], metrics["scratch"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from lmforge.errors import LmforgeError

    try:
        return run(args)
    except (UsageError, LmforgeError) as exc:
        message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"transfer.py: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
