# The two commands a user needs: `make run` (the whole pipeline on the embedded default
# corpus) and `make test`. Both create .venv from this project's own files when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test clean-outputs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(VENV)/bin/lmforge run

test: $(VENV)/.installed-dev
	$(PY) -m pytest $(PYTEST_ARGS)

clean-outputs:
	rm -rf data
