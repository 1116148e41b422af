"""Running lm-eval tasks (``evaluate.harness``) on a :class:`~lmforge.evaluation.harness.CausalScorer`:
lm-eval imported lazily (the ``eval`` extra), the task list resolved (our built-in tasks, YAML
files, lm-eval's own task names) with one clear line for a name that is none of them, and the
results cut down to ``{task: {metric: value, ..., "n": questions}}``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from ..errors import ConfigError

INSTALL = "pip install 'lmforge[eval]'"


def require_lm_eval():
    """The ``lm_eval`` module, or a one-line ConfigError naming the extra."""
    try:
        import lm_eval
    except ImportError:
        raise ConfigError(f"evaluate.harness needs EleutherAI's lm-eval, which is not installed: {INSTALL}") from None
    return lm_eval


def _yaml_task_name(path: Path) -> str:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"evaluate.harness: {path}: not a readable YAML task ({type(exc).__name__})") from None
    if not isinstance(config, dict) or not isinstance(config.get("task"), str):
        raise ConfigError(f"evaluate.harness: {path}: an lm-eval task YAML names its task (a `task:` key)")
    return config["task"]


def resolve_tasks(specs: Sequence[str], local: Mapping[str, Path] | None = None, *,
                  include_defaults: bool = True):
    """(lm-eval task names, TaskManager) for ``specs``: a name of ``local`` (our built tasks: name
    -> YAML), a path to a YAML task, or one of lm-eval's task names (lm-eval's own index, read only
    when such a name is asked for). Anything else is a one-line ConfigError."""
    require_lm_eval()
    from lm_eval.tasks import TaskManager

    local = dict(local or {})
    names, include = [], []
    for spec in specs:
        if spec in local:
            names.append(spec)
            include.append(str(Path(local[spec]).resolve().parent))
        elif spec.endswith((".yaml", ".yml")):
            path = Path(spec)
            if not path.is_file():
                raise ConfigError(f"evaluate.harness: {spec}: no such task file")
            names.append(_yaml_task_name(path))
            include.append(str(path.resolve().parent))
        else:
            names.append(spec)
    wanted_defaults = include_defaults and any(n not in local and not s.endswith((".yaml", ".yml"))
                                               for n, s in zip(names, specs))
    manager = TaskManager(include_path=sorted(set(include)) or None, include_defaults=wanted_defaults)
    known = set(manager.all_tasks)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"evaluate.harness: unknown task {unknown[0]!r} (not a built-in task "
                          f"({', '.join(sorted(local)) or 'none'}), not a YAML file, not one of lm-eval's "
                          "tasks: `lm_eval ls tasks` lists them)")
    return names, manager


def _numbers(metrics: Mapping) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        metric, _, _filter = str(key).partition(",")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and metric != "alias":
            out[metric] = float(value)
    return out


def run_tasks(scorer, specs: Sequence[str], local: Mapping[str, Path] | None = None, *, limit: int | None = None,
              name: str = "lmforge", include_defaults: bool = True) -> dict[str, dict[str, float]]:
    """``{task: {acc, acc_norm, ..., n}}`` of ``scorer`` on ``specs`` (zero-shot), scored by lm-eval."""
    lm_eval = require_lm_eval()
    from .lm_eval_model import ScorerLM

    names, manager = resolve_tasks(specs, local, include_defaults=include_defaults)
    results = lm_eval.simple_evaluate(model=ScorerLM(scorer, name), tasks=names, task_manager=manager,
                                      num_fewshot=0, limit=limit, bootstrap_iters=0, log_samples=False,
                                      random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0,
                                      verbosity="WARNING")
    out = {}
    for task in names:
        scores = _numbers(results["results"].get(task, {}))
        counts = (results.get("n-samples") or {}).get(task) or {}
        if "effective" in counts:
            scores["n"] = int(counts["effective"])
        out[task] = scores
    return out
