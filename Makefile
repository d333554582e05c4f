# hybrid-operator developer commands. `make run` and `make test` set up everything they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.setup-done
# The pins of requirements.lock go in with uv (seconds; pip took 1.5 minutes of `make test`, most of it
# compiling bytecode for every file of the `ansible` package, which Python compiles on first import
# instead). Where uv cannot reach the index (a pip-only mirror in pip.conf), pip installs the same pins.
UV_VERSION := 0.13.9
# `make conformance PATH=<checkout>` names the checkout PATH (as issue 14 spells it): take it, and give the
# recipes back the PATH of the environment (CHECKOUT=<checkout> works too).
ifeq ($(origin PATH),command line)
CHECKOUT := $(PATH)
ENV_PATH := $(shell printenv PATH)
override PATH := $(if $(filter $(CHECKOUT),$(ENV_PATH)),/usr/local/bin:/usr/bin:/bin,$(ENV_PATH))
endif
override PATH := $(BIN):$(PATH)
export PATH
# Python writes bytecode, as it does by default, even where the environment says not to
# (PYTHONDONTWRITEBYTECODE=1 on this project's CI machines): `make test` starts hundreds of Python processes
# (operators, clusters, playbooks, the CLI), and each compiled hybrid_operator from source again.
unexport PYTHONDONTWRITEBYTECODE
CONFORMANCE_FLAGS ?=
PYTEST_FLAGS ?=
# flags for `hybrid-operator up` (make run) or `cluster` (make cluster), e.g. ARGS='--port 6444'
ARGS ?=
# `make test` runs the test files on three workers (pytest-xdist); a file's tests stay on one worker,
# so module fixtures (an operator process, a namespace) are shared as written. Three on two cores: the
# suite is CPU-bound (modules and playbooks run warm; what is left is mostly process start-up). On
# 2026-12-02, fresh clones: three workers 6:44-7:21 (median 7:00 of five), four 6:48 and 7:32: no
# clear difference, and three leave less contention for the tests that time things. TEST_WORKERS=0: serial.
TEST_WORKERS ?= 3

.PHONY: setup run cluster test test-unit test-integration test-security test-newcomer lint bench bench-quick bench-sequential bench-cluster bench-sharding bench-helm chaos chaos-smoke coverage clean \
	manifests molecule dist conformance kube kube-sync test-kube

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock scripts/install_tools.py
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -r requirements.lock \
		|| $(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e . \
		|| $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(BIN)/python scripts/install_tools.py --bin-dir $(BIN)
	touch $(STAMP)

run: setup  ## local cluster + CRDs + operator + sample resources, with a live summary (Ctrl-C stops); ARGS='--port 6444'
	$(BIN)/hybrid-operator up $(ARGS)

cluster: setup  ## the embedded cluster alone, in the foreground; ARGS='--port 6444'
	$(BIN)/hybrid-operator cluster $(ARGS)

lint: setup  ## ruff, mypy --strict, import-linter contracts, complexity/size limits (radon)
	$(BIN)/ruff check operator tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/mypy --strict scripts/install_tools.py scripts/conformance.py scripts/conformance_checkout.py scripts/kube_build.py scripts/kube_sync.py scripts/kep5866_probe.py benchmarks
	$(BIN)/lint-imports
	$(BIN)/python scripts/lint_complexity.py

test-unit: setup
	$(BIN)/pytest -m unit -q $(PYTEST_FLAGS)

test-integration: setup
	$(BIN)/pytest -m "(integration or e2e) and not newcomer" -q $(PYTEST_FLAGS)

test-security: setup  ## the attacks of docs/security.md (also part of `make test`)
	$(BIN)/pytest -m security -q $(PYTEST_FLAGS)

# `make lint` runs beside pytest (its output follows pytest's): alone it kept one of the two cores idle for
# its 20 s. Either failing fails `make test`.
test: setup  ## lint, and every test but the newcomer path (make test-newcomer); the chaos smoke run included
	@mkdir -p .hybrid; $(MAKE) --no-print-directory lint > .hybrid/lint.log 2>&1 & lint=$$!; \
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 -m "not newcomer" $(PYTEST_FLAGS); tests=$$?; \
	wait $$lint; linted=$$?; echo "--- make lint (exit $$linted)"; cat .hybrid/lint.log; \
	test $$tests -eq 0 -a $$linted -eq 0

test-newcomer: setup  ## a new project from init to make molecule with its own setup; two make run side by side (minutes)
	$(BIN)/pytest -m newcomer -q -s $(PYTEST_FLAGS)

dist: setup  ## a wheel of hybrid-operator in dist/ (a project made by its `init` installs from that wheel)
	$(BIN)/python -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir dist .

manifests: setup  ## config/crd, config/rbac, config/manager from watches.yaml, schemas/ and the automation
	$(BIN)/hybrid-operator generate all

molecule: setup  ## every molecule/ scenario, each against its own embedded cluster (MOLECULE_KUBECONFIG reuses one)
	$(BIN)/molecule test --all

conformance: setup  ## an Operator SDK Ansible test operator's molecule tests on hybrid-operator: PATH=<checkout>
	@test -n "$(CHECKOUT)" || { echo "usage: make conformance PATH=<checkout of an SDK Ansible test operator>" \
		"[CONFORMANCE_FLAGS='--only x_test.yml']" >&2; exit 2; }
	$(BIN)/python scripts/conformance.py $(CHECKOUT) $(CONFORMANCE_FLAGS)

bench: setup  ## issue 16 figures against same-run baselines -> docs/performance.md; ARGS=--quick for a smoke run
	$(BIN)/python benchmarks/bench.py --output docs/performance.md $(ARGS)

bench-sequential: setup  ## make bench's two end-to-end CR create -> Successful rows alone, printed (about a minute)
	$(BIN)/python benchmarks/bench.py --only sequential

bench-quick: setup  ## make bench, small counts (a smoke run; the table goes to stdout only)
	$(BIN)/python benchmarks/bench.py --quick

bench-cluster: setup
	$(BIN)/python benchmarks/cluster_bench.py

bench-helm: setup  ## Helm no-change resync against `helm upgrade` (benchmarks/helm_bench.py; ARGS=--quick)
	$(BIN)/python benchmarks/helm_bench.py $(ARGS)

coverage: setup  ## make test's pytest run with line coverage of hybrid_operator, subprocesses included (slower): the report, and .coverage
	rm -f .coverage .coverage.*
	COVERAGE_FILE=$(CURDIR)/.coverage $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not newcomer" \
		--cov --cov-report=term $(PYTEST_FLAGS)

chaos-smoke: setup  ## `make chaos --quick` checked: every scenario ran, 0 lost, 0 duplicated (also in make test)
	$(BIN)/pytest -m chaos -q $(PYTEST_FLAGS)

chaos: setup  ## fault injection (kill -9, outages, storms, soak): the table of docs/reliability.md (bounded loops; 10 min on a 2-core machine)
	$(BIN)/python benchmarks/chaos.py --output docs/reliability.md

# -- the real control plane (docs/real-cluster.md) -------------------------------------------------
# kube-apiserver, kube-controller-manager (k8s.io/kubernetes, pinned in tools/kube/go.mod) and our etcd
# main, built into ~/.cache/hybrid-operator/kube/<release>/bin ($$HYBRID_CACHE moves it); reused when the
# stamp matches. A first build takes 10-25 minutes on 2 cores (nice'd: it yields to everything else).
kube: setup  ## build the real control plane into the cache (first time: minutes; then reused)
	nice -n 10 $(BIN)/python scripts/kube_build.py

kube-sync: setup  ## pin tools/kube/go.mod to the release in localcluster/realplane/build.py (staging replaces derived from its go.mod)
	$(BIN)/python scripts/kube_sync.py

test-kube: kube  ## the tests that run the real control plane (pytest -m kube)
	$(BIN)/pytest -m kube -q $(PYTEST_FLAGS)

clean:
	rm -rf $(VENV) .hybrid .pytest_cache .mypy_cache .ruff_cache

# -- in a real cluster (the one $KUBECONFIG points at) ------------------------------------------
.PHONY: deploy undeploy docker-build
KUBECTL ?= kubectl
DOCKER ?= docker
IMG ?= hybrid-operator:latest

deploy:  ## CRDs, RBAC (namespace, service account, cluster role) and the operator Deployment
	$(KUBECTL) apply -f config/crd -f config/rbac -f config/manager

# CRDs first, while the operator still runs: their custom resources' finalizers need it.
undeploy:
	$(KUBECTL) delete --ignore-not-found -f config/crd
	$(KUBECTL) delete --ignore-not-found -f config/manager -f config/rbac

docker-build:  ## the operator image ($(IMG)) from the Dockerfile
	@command -v $(DOCKER) >/dev/null || { echo "docker-build: '$(DOCKER)' is not installed" >&2; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "docker-build: '$(DOCKER)' cannot reach a Docker engine" \
		"($(DOCKER) info failed): start one or point DOCKER_HOST at one" >&2; exit 1; }
	$(DOCKER) build -t $(IMG) .

bench-sharding: setup  ## 1, 2, 3 sharded replicas on 300 CRs, with and without server-side shardSelector (docs/sharding-bench.md)
	$(BIN)/python benchmarks/sharding_bench.py $(ARGS)
