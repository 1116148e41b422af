#!/bin/sh
# The images' entry point. Before running its command:
#  0. refuses to start when a credential still holds the placeholder of docker/.env.example
#     (change-me), whichever service this is;
#  1. selects the Dagster instance config by DAGSTER_STORAGE, as the Makefile does:
#     sqlite (default) -> dagster_project/dagster.yaml, postgres -> dagster_project/dagster.postgres.yaml
#     (which reads DAGSTER_PG_HOST/PORT/USER/PASSWORD/DB from the environment; all five must be set),
#     copied to $DAGSTER_HOME/dagster.yaml;
#  2. applies LMFORGE_SET, whitespace-separated KEY=VALUE overrides in lmforge's --set syntax, to
#     the container's copy of params.yaml (e.g. LMFORGE_SET="tracking.uri=http://mlflow:5000");
#  3. with MLFLOW_AUTH_DATABASE_URI (the MLflow service), writes the configuration of MLflow's
#     basic-auth app (where its accounts live) to a file only this user reads, named by
#     MLFLOW_AUTH_CONFIG_PATH; the admin account comes from MLFLOW_AUTH_ADMIN_USERNAME/PASSWORD.
set -eu

placeholder="change-me"
for var in POSTGRES_PASSWORD DAGSTER_PG_PASSWORD MLFLOW_TRACKING_PASSWORD MLFLOW_AUTH_ADMIN_PASSWORD \
           MLFLOW_FLASK_SERVER_SECRET_KEY AWS_SECRET_ACCESS_KEY MLFLOW_BACKEND_STORE_URI MLFLOW_AUTH_DATABASE_URI; do
  eval "value=\${$var:-}"
  case "$value" in
    "$placeholder"|*":$placeholder@"*)
      echo "entrypoint: $var holds the placeholder password of docker/.env.example; set a real one in docker/.env" >&2
      exit 64
      ;;
  esac
done

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
    ;;
  *)
    echo "entrypoint: DAGSTER_STORAGE must be sqlite or postgres, not '$storage'" >&2
    exit 64
    ;;
esac
mkdir -p "$DAGSTER_HOME"
cp "$config" "$DAGSTER_HOME/dagster.yaml"

if [ -n "${MLFLOW_AUTH_DATABASE_URI:-}" ]; then
  umask 077
  auth_config="$(mktemp "${TMPDIR:-/tmp}/mlflow-auth.XXXXXX")"
  # configparser reads "%" as interpolation: doubled
  printf '[mlflow]\ndefault_permission = %s\ndatabase_uri = %s\nadmin_username = %s\nauthorization_function = mlflow.server.auth:authenticate_request_basic_auth\n' \
    "${MLFLOW_AUTH_DEFAULT_PERMISSION:-READ}" "$(printf '%s' "$MLFLOW_AUTH_DATABASE_URI" | sed 's/%/%%/g')" \
    "${MLFLOW_AUTH_ADMIN_USERNAME:-admin}" > "$auth_config"
  umask 022
  export MLFLOW_AUTH_CONFIG_PATH="$auth_config"
fi

if [ -n "${LMFORGE_SET:-}" ]; then
  # shellcheck disable=SC2086  # one argument per KEY=VALUE
  python "$project/docker/set_params.py" "$project/params.yaml" $LMFORGE_SET
fi

exec "$@"
