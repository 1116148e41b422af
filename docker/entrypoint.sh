#!/bin/sh
# The images' entry point. Before running its command:
#  1. selects the Dagster instance config by DAGSTER_STORAGE, as the Makefile does:
#     sqlite (default) -> dagster_project/dagster.yaml, postgres -> dagster_project/dagster.postgres.yaml
#     (which reads DAGSTER_PG_HOST/PORT/USER/PASSWORD/DB from the environment; all five must be set),
#     copied to $DAGSTER_HOME/dagster.yaml;
#  2. applies LMFORGE_SET, whitespace-separated KEY=VALUE overrides in lmforge's --set syntax, to
#     the container's copy of params.yaml (e.g. LMFORGE_SET="tracking.uri=http://mlflow:5000").
set -eu

project="${LMFORGE_PROJECT:-/project}"
export DAGSTER_HOME="${DAGSTER_HOME:-/opt/dagster/home}"

storage="${DAGSTER_STORAGE:-sqlite}"
case "$storage" in
  sqlite)
    config="$project/dagster_project/dagster.yaml"
    ;;
  postgres)
    config="$project/dagster_project/dagster.postgres.yaml"
    for var in DAGSTER_PG_HOST DAGSTER_PG_PORT DAGSTER_PG_USER DAGSTER_PG_PASSWORD DAGSTER_PG_DB; do
      eval "value=\${$var:-}"
      if [ -z "$value" ]; then
        echo "entrypoint: DAGSTER_STORAGE=postgres needs $var in the environment (docker/.env)" >&2
        exit 64
      fi
    done
    if [ "$DAGSTER_PG_PASSWORD" = "change-me" ]; then
      echo "entrypoint: DAGSTER_PG_PASSWORD is the placeholder of docker/.env.example; set POSTGRES_PASSWORD in docker/.env" >&2
      exit 64
    fi
    ;;
  *)
    echo "entrypoint: DAGSTER_STORAGE must be sqlite or postgres, not '$storage'" >&2
    exit 64
    ;;
esac
mkdir -p "$DAGSTER_HOME"
cp "$config" "$DAGSTER_HOME/dagster.yaml"

if [ -n "${LMFORGE_SET:-}" ]; then
  # shellcheck disable=SC2086  # one argument per KEY=VALUE
  python "$project/docker/set_params.py" "$project/params.yaml" $LMFORGE_SET
fi

exec "$@"
