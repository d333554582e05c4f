# hybrid-operator developer commands. `make run` and `make test` set up everything they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.setup-done
export PATH := $(BIN):$(PATH)
PYTEST_FLAGS ?=

.PHONY: setup run cluster test test-unit test-integration lint bench-cluster clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock scripts/install_tools.py
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(BIN)/python scripts/install_tools.py --bin-dir $(BIN)
	touch $(STAMP)

run: setup  ## the embedded cluster (the operator joins it once `hybrid-operator up` exists)
	$(BIN)/hybrid-operator cluster

cluster: run

lint: setup
	$(BIN)/ruff check operator tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/mypy --strict scripts/install_tools.py benchmarks
	$(BIN)/lint-imports

test-unit: setup
	$(BIN)/pytest -m unit -q $(PYTEST_FLAGS)

test-integration: setup
	$(BIN)/pytest -m "integration or e2e" -q $(PYTEST_FLAGS)

test: setup lint
	$(BIN)/pytest -q $(PYTEST_FLAGS)

bench-cluster: setup
	$(BIN)/python benchmarks/cluster_bench.py

clean:
	rm -rf $(VENV) .hybrid .pytest_cache .mypy_cache .ruff_cache
