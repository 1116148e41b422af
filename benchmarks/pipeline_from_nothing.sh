#!/bin/sh
# The whole pipeline of project folder $1 through Dagster, from nothing: its outputs, MLflow
# store, Dagster instance and DVC lock are removed first (only those of $1: point it at a copy).
# What `make run` does after `lmforge dvc`, as one command for farm-bench, e.g. with two copies
# of a project that differ in orchestrate.training_process (BENCHMARKS.md, "The default run").
# The run's log is appended to $1.log.
set -e
[ -f "$1/params.yaml" ] || { echo "usage: $0 PROJECT_FOLDER (a copy of a project: its outputs are removed)" >&2; exit 2; }
root=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
cd "$root"
rm -rf data models mlflow.db mlflow.db.lock mlartifacts .dagster dvc.lock
mkdir .dagster && cp dagster_project/dagster.yaml .dagster/
DAGSTER_HOME="$root/.dagster" exec "$python" -m dagster_project.run >> "$root.log" 2>&1
