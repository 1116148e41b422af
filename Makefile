# The two commands a user needs: `make run` (the whole pipeline on the embedded default
# corpus) and `make test`. Both create .venv from this project's own files when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

# The embedded Dagster instance (sqlite) lives in the project folder.
export DAGSTER_HOME := $(CURDIR)/.dagster
HOST ?= 127.0.0.1
PORT ?= 3000
MLFLOW_PORT ?= 5000

.PHONY: run test ui repro dvc clean-outputs transfer

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

# DAGSTER_STORAGE=postgres: the instance on PostgreSQL (DAGSTER_PG_* in the environment).
DAGSTER_STORAGE ?= sqlite
DAGSTER_CONFIG := dagster_project/dagster$(if $(filter postgres,$(DAGSTER_STORAGE)),.postgres,).yaml

.PHONY: $(DAGSTER_HOME)/dagster.yaml
$(DAGSTER_HOME)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME)
	cmp -s $(DAGSTER_CONFIG) $@ || cp $(DAGSTER_CONFIG) $@

# Materialize every asset on the embedded default corpus through Dagster (runs recorded in
# .dagster/, each stage then recorded in dvc.lock: `dvc status` is clean afterwards).
run: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/lmforge dvc
	$(PY) -m dagster_project.run

# The transfer profile (`make transfer`): in its own project folder (TRANSFER_PROJECT, made by
# `lmforge init`), the data stages on the corpus the time-to-pay curves were measured on (the
# standard library and four installed packages' docstrings; BPE, WordPiece and Unigram
# vocabularies of 4,096), then every
# architecture pretrained for its recipe's measured time to pay (sizes.<size>.time_to_pay;
# TRANSFER_CAP minutes where the recipe records none, or none of its measured budgets paid) and
# fine-tuned with three seeds beside its from-scratch control; it prints the transfer table.
TRANSFER_PROJECT ?= transfer-profile
TRANSFER_CAP ?= 8
TRANSFER_SET ?= clean.include_site_packages=[numpy,pandas,sklearn,networkx] tokenizer.bpe.vocab_size=4096 \
	tokenizer.wordpiece.vocab_size=4096 tokenizer.unigram.vocab_size=4096
TRANSFER_ARGS ?= --task docstring_package --seeds 0 1 2 --set finetune.max_train_examples=1000 train.threads=1
transfer: $(VENV)/.installed
	test -e $(TRANSFER_PROJECT)/params.yaml || $(VENV)/bin/lmforge init $(TRANSFER_PROJECT)
	cd $(TRANSFER_PROJECT) && for verb in clean tokenizer tokenize dataset; do \
		$(CURDIR)/$(VENV)/bin/lmforge $$verb $(addprefix --set ,$(TRANSFER_SET)) || exit 1; done
	$(PY) benchmarks/transfer.py --project $(TRANSFER_PROJECT) --time-to-pay $(TRANSFER_CAP) $(TRANSFER_ARGS) \
		$(addprefix --set ,$(TRANSFER_SET)) --json $(TRANSFER_PROJECT)/transfer.json

# The Dagster UI (webserver and daemon: schedules, sensors) on $(HOST):$(PORT).
ui: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml
	@echo "Dagster UI: http://$(HOST):$(PORT)"
	@echo "MLflow UI (another terminal): $(VENV)/bin/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlflow.db --host 127.0.0.1 --port $(MLFLOW_PORT)"
	$(VENV)/bin/dagster dev -m dagster_project.definitions -h $(HOST) -p $(PORT)

# DVC's view of the same graph: regenerate dvc.yaml, then reproduce what changed.
dvc: $(VENV)/.installed
	$(VENV)/bin/lmforge dvc

repro: $(VENV)/.installed
	$(VENV)/bin/lmforge dvc
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/dvc repro

# The suite in two worker processes (pytest-xdist): the end-to-end tests wait on subprocesses
# and servers as much as they compute, so two workers finish it in about two thirds of the time
# on two cores. PYTEST_ARGS='-n 0' runs it in one process. (Whole files per worker, the files
# with slow tests first, took 24 min 27 s against 23 min 30 s: BENCHMARKS.md, "The test suite".)
PYTEST_ARGS ?= -n 2

test: $(VENV)/.installed-dev
	$(PY) -m pytest $(PYTEST_ARGS)

clean-outputs:
	rm -rf data
