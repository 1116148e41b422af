#!/bin/sh
# Run once by the official postgres image, when its data volume is empty: POSTGRES_DB (Dagster's
# database) exists by then; this creates MLflow's database, owned by POSTGRES_USER.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v db="${MLFLOW_PG_DB:-mlflow}" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SQL
