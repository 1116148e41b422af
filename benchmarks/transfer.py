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

**The curve** (``--budgets M [M ...]``): the transfer gain against the pretraining's wall-clock
budget. For each budget (minutes) every architecture is pretrained for that long
(``train.budget_minutes``, the schedule decaying to its floor at the budget's end) into
``<out>/budget-<M>min/<arch>/pretrain``, then fine-tuned per seed beside its from-scratch control;
the controls do not depend on the budget and run once per seed (``<out>/scratch/seed-<s>``). The
table has one row per (architecture, task, budget): the steps the budget bought, the validation
loss against its unigram baseline, the two accuracies, the gain. The **time to pay** of an
(architecture, task) is the least budget whose gain pays (the mean over seeds at least 3 points
and above the seeds' spread); ``--chart PNG`` draws the gain against the minutes, one line per
architecture, the spread as bars. The project's own models are never read or written in this mode.

    python benchmarks/transfer.py --project P --arch bert --task docstring_package --budgets 1 2 4 \
        --seeds 0 1 2 --set finetune.max_train_examples=1000 --chart curve.png --json curve.json

**The profile** (``--time-to-pay [CAP]``, what ``make transfer`` runs): each architecture is
pretrained once, for its recipe's measured time to pay (``sizes.<size>.time_to_pay.minutes``;
``CAP`` minutes, default 8, where the recipe records none or none of its measured budgets paid),
then fine-tuned per seed beside its control, as in the curve mode; the table has one row per
(architecture, task), followed by how many beat the majority class by 5 points, reach bag of
words and pay.

    python benchmarks/transfer.py --project . --time-to-pay --task docstring_package --seeds 0 1 2 \
        --set finetune.max_train_examples=1000 train.threads=1

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
    parser.add_argument("--budgets", nargs="+", type=float, metavar="MINUTES",
                        help="the curve: pretrain for each of these wall-clock budgets (minutes), fine-tune each")
    parser.add_argument("--time-to-pay", nargs="?", type=float, const=8.0, default=None, metavar="CAP",
                        help="pretrain each architecture for its recipe's measured time to pay (CAP minutes, "
                             "default 8, where its recipe records none or none paid), fine-tune each")
    parser.add_argument("--chart", help="with --budgets: draw the curves into this PNG")
    args = parser.parse_args(argv)
    if args.time_to_pay is not None:
        if args.budgets is not None or args.pretrain:
            parser.error("--time-to-pay pretrains each architecture for its own budget; not with --budgets or --pretrain")
        if args.time_to_pay <= 0:
            parser.error("--time-to-pay: the cap is a positive number of minutes")
    if args.budgets is not None and (any(b <= 0 for b in args.budgets) or len(set(args.budgets)) != len(args.budgets)):
        parser.error("--budgets: each budget is a positive number of minutes, given once")
    if args.chart and args.budgets is None and args.time_to_pay is None:
        parser.error("--chart draws the curves of --budgets")
    if args.budgets is not None and args.pretrain:
        parser.error("--budgets pretrains for each budget itself; --pretrain is for the project's own models")
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
    if args.budgets is not None:
        plan = {arch: sorted(args.budgets) for arch in archs}
        return run_curve(args, plan, base, archs, tasks, project, params_path, out_root, json_path, overrides, say)
    if args.time_to_pay is not None:
        plan = time_to_pay_plan(base, archs, args.time_to_pay, say)
        return run_curve(args, plan, base, archs, tasks, project, params_path, out_root, json_path, overrides, say)
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
    show(format_table(rows), summary_lines(rows), args.seeds)
    if json_path is not None:
        write_json(json_path, {"project": str(project), "params": str(params_path), "seeds": args.seeds,
                               "overrides": overrides, "output": str(out_root), "runs": runs, "rows": rows}, say)
    return 0


def show(table: str, lines: list[str], seeds: list[int]) -> None:
    """The table, then its summary lines, on stdout (with the one-seed caveat)."""
    print(table)
    print()
    for line in lines:
        print(line)
    if len(seeds) == 1:
        print(f"(one seed: no spread; a gain pays when it exceeds {MIN_GAIN:g} points)")


def write_json(path: Path, record: dict, say) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    say(f"wrote {path}")


def budget_name(minutes: float) -> str:
    return f"budget-{minutes:g}min"


def time_to_pay_plan(base, archs: list[str], cap: float, say) -> dict[str, list[float]]:
    """Each architecture's pretraining budget in the ``--time-to-pay`` mode: its recipe's measured
    time to pay (``sizes.<size>.time_to_pay.minutes``), ``cap`` minutes where the recipe records
    none or none of its measured budgets paid."""
    from lmforge.config.recipes import load_recipe

    plan = {}
    for arch in archs:
        ttp = load_recipe(base, arch).sizes[base.train.size].time_to_pay
        if ttp is not None and ttp.minutes is not None:
            plan[arch] = [ttp.minutes]
            say(f"== {arch}: its time to pay, {ttp.minutes:g} minutes ({ttp.source})")
        else:
            plan[arch] = [cap]
            say(f"== {arch}: no measured time to pay in its recipe; the cap, {cap:g} minutes")
    return plan


def run_curve(args, plan: dict[str, list[float]], base, archs, tasks, project: Path, params_path: Path, out_root: Path,
              json_path: Path | None, overrides: list[str], say) -> int:
    """The curve mode: pretrain each architecture for each of its budgets (``plan``), fine-tune
    per seed, one shared scratch control per architecture."""
    from lmforge import layout
    from lmforge.training.finetune import run_finetune
    from lmforge.training.pretrain import run_pretrain

    budgets = sorted({m for minutes in plan.values() for m in minutes})
    if out_root == (project / base.train.output).resolve():
        raise UsageError(f"--out {out_root} is the project's train.output; the benchmark writes elsewhere")
    pretraining: dict[tuple[str, float], dict] = {}
    for minutes in budgets:
        params = with_values(base, budget_minutes=minutes, output=str(out_root / budget_name(minutes)))
        for arch in (a for a in archs if minutes in plan[a]):
            say(f"== pretrain {arch} for {minutes:g} minutes")
            m = run_pretrain(params, arch, log=say)
            pretraining[(arch, minutes)] = {
                "steps": m["steps"], "seconds": m["seconds"], "loss": m["validation"]["loss"],
                "unigram_loss": m["validation"].get("unigram_loss"), "compute": m.get("compute"),
                "path": str(project / layout.pretrain_dir(params, arch))}
    runs = []
    for seed in args.seeds:
        scratch_params = with_values(base, seed=seed, output=str(out_root / "scratch" / f"seed-{seed}"))
        for arch in archs:
            # the control's model is built from the recipe alone; the link only gives it a pretraining folder to name
            link_pretrained(Path(pretraining[(arch, plan[arch][0])]["path"]), out_root / "scratch" / f"seed-{seed}", arch)
            for task in tasks:
                say(f"== {arch} / {task} / seed {seed}: scratch")
                scratch = run_finetune(scratch_params, arch, task, from_scratch=True, log=say)
                for minutes in plan[arch]:
                    out = out_root / budget_name(minutes) / f"seed-{seed}"
                    params = with_values(base, seed=seed, output=str(out))
                    link_pretrained(Path(pretraining[(arch, minutes)]["path"]), out, arch)
                    say(f"== {arch} / {task} / seed {seed}: pretrained {minutes:g} minutes")
                    pre = run_finetune(params, arch, task, log=say)
                    runs.append({**record(arch, pre["task"], seed, pre, scratch), "budget_minutes": minutes,
                                 "pretraining": pretraining[(arch, minutes)]})
    rows = curve_rows(runs)
    lines = time_to_pay_lines(rows)
    if args.time_to_pay is not None:  # one budget per architecture: the profile's summary too
        lines = summary_lines(rows) + lines
    show(format_curve(rows), lines, args.seeds)
    if args.chart:
        chart = Path(args.chart).expanduser().resolve()
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_bytes(draw_curves(rows))
        say(f"wrote {chart}")
    if json_path is not None:
        write_json(json_path, {"project": str(project), "params": str(params_path), "seeds": args.seeds,
                               "budgets": plan, "overrides": overrides, "output": str(out_root), "runs": runs,
                               "rows": rows, "time_to_pay": time_to_pay(rows)}, say)
    return 0


def curve_rows(runs: list[dict]) -> list[dict]:
    """:func:`summarize` per budget, each row with its ``budget_minutes`` and pretraining figures."""
    rows = []
    for minutes in sorted({r["budget_minutes"] for r in runs}):
        group = [r for r in runs if r["budget_minutes"] == minutes]
        for row in summarize(group):
            first = next(r for r in group if (r["architecture"], r["task"]) == (row["architecture"], row["task"]))
            rows.append({**row, "budget_minutes": minutes, "pretraining": first["pretraining"]})
    rows.sort(key=lambda r: (r["architecture"], r["task"], r["budget_minutes"]))
    return rows


def time_to_pay(rows: list[dict]) -> dict[str, float | None]:
    """``"<arch> / <task>"`` -> the least budget (minutes) whose gain pays; None where none does."""
    out: dict[str, float | None] = {}
    for r in rows:
        key = f"{r['architecture']} / {r['task']}"
        out.setdefault(key, None)
        if r["pays"] and out[key] is None:
            out[key] = r["budget_minutes"]
    return out


def time_to_pay_lines(rows: list[dict]) -> list[str]:
    lines = []
    covered = {f"{r['architecture']} / {r['task']}": r["budget_minutes"] for r in rows}  # the largest (rows sorted)
    for key, minutes in time_to_pay(rows).items():
        lines.append(f"{key}: time to pay {minutes:g} minutes" if minutes is not None
                     else f"{key}: does not pay within {covered[key]:g} minutes")
    return lines


def format_curve(rows: list[dict]) -> str:
    """The curve table; with the pretrainings' compute records, what each budget cost (the tokens,
    the model FLOPs and the processor minutes: CPU time on a CPU, wall time x GPUs on GPUs)."""
    from lmforge.evaluation.report.leaderboard import compute_cost

    costs = [compute_cost(r["pretraining"].get("compute")) for r in rows]
    head = ["architecture", "task", "budget (min)", "steps", "val loss (unigram)", "pretrained acc.", "scratch acc.",
            "gain (points)", "pays"] + (["pretraining cost"] if any(costs) else [])
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * 6 + ":---:|" + ("---|" if any(costs) else "")]
    for r, cost in zip(rows, costs):
        p = r["pretraining"]
        unigram = f" ({p['unigram_loss']:.3f})" if p.get("unigram_loss") is not None else ""
        cells = [r["architecture"], r["task"], f"{r['budget_minutes']:g}", str(p["steps"]), f"{p['loss']:.3f}{unigram}",
                 pm(r["pretrained"]), pm(r["scratch"]), pm(r["gains"], signed=True), "yes" if r["pays"] else "no"]
        lines.append("| " + " | ".join(cells + ([cost or "–"] if any(costs) else [])) + " |")
    return "\n".join(lines)


def draw_curves(rows: list[dict]) -> bytes:
    """The gain (points) against the pretraining budget, one line per (architecture, task), the
    seeds' standard deviation as error bars; the 3-point line dashed."""
    from lmforge.charts import png, subplots

    fig, ax = subplots(1, 1, figsize=(7.0, 4.0), layout="constrained")
    for key in dict.fromkeys((r["architecture"], r["task"]) for r in rows):
        group = [r for r in rows if (r["architecture"], r["task"]) == key]
        ax.errorbar([r["budget_minutes"] for r in group], [r["gain"] for r in group],
                    yerr=[r["gain_sd"] or 0.0 for r in group], marker="o", capsize=3, label=" / ".join(key))
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.axhline(MIN_GAIN, color="grey", linestyle="--", linewidth=1, label=f"pays: +{MIN_GAIN:g} points")
    ax.set_xlabel("pretraining budget (wall-clock minutes)")
    ax.set_ylabel("transfer gain (points, pretrained - scratch)")
    ax.set_title("Time to pay")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return png(fig)


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
