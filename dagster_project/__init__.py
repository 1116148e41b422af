"""Dagster definitions for lmforge: assets from the stage registry (lmforge.stages), their
checks, resources (params, MLflow, DVC), jobs, the weekly retraining schedule and the
new-input sensor. No ML logic lives here; every asset calls a library function."""
