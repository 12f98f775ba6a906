# One entry point for every task. `make dev` and `make test` set themselves up on a fresh machine.
SHELL := /bin/bash
# SAM CLI must not try to send telemetry (and this machine has no internet).
export SAM_CLI_TELEMETRY := 0
.DEFAULT_GOAL := help

# The Lambda runtime is python3.12; develop and test on the same interpreter.
# (pyenv's shim on PATH may exist yet refuse to run, so each candidate is tried.)
PYTHON312 ?= $(shell for c in $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12*/bin/python3.12 2>/dev/null) $$(command -v python3.12); do "$$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$c"; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := .tools
SAM := $(TOOLS)/bin/sam
# Checkov pins its own dependency tree (boto3 among them): a virtualenv of its own.
CHECKOV_ENV := .tools-checkov
CHECKOV := $(CHECKOV_ENV)/bin/checkov
PYTEST_ARGS ?=
# The part of the e2e suite that `make test` also runs against the `sam build` output (built
# mode): every function with every sample event, the HTTP walkthrough and contract (idempotent
# PUT, bad input), and a poison record through the stream, retry-queue and operator-queue
# functions. The concurrency tests stay in the source-mode run: they test scale, not packaging.
E2E_BUILT ?= tests/e2e/test_every_function.py \
	tests/e2e/test_http_contract.py::test_walkthrough \
	tests/e2e/test_http_contract.py::test_put_is_idempotent \
	tests/e2e/test_http_contract.py::test_bad_input_gets_a_4xx_with_the_error_body_and_writes_nothing \
	tests/e2e/test_failure_paths.py


.PHONY: help deps dev dev-built lint typecheck unit integration integration-built e2e e2e-built scan docs sam-validate sam-build test bench bench-local sam-local localstack-e2e clean

help:
	@echo "make dev        start the service locally (embedded runtime, no Docker): http://127.0.0.1:$${PORT:-3000}"
	@echo "make test       lint, typecheck, docs, sam validate --lint, sam build, scan, unit, integration, e2e (and part of e2e on the build)"
	@echo "make docs       the documentation site, strict (build/site/)"
	@echo "make scan       Checkov's CloudFormation policies on template.yaml"
	@echo "make bench      benchmarks: cost per call, growth, throughput ceiling, latency (bench-results/)"
	@echo "make dev-built  like dev, but running the sam build output on a clean python3.12"
	@echo "make bench-local  what the local runtime adds per request; latency at 50 create+delete pairs/s"
	@echo "make sam-local  every function with every events/ file through sam local invoke (needs Docker)"
	@echo "make localstack-e2e  deploy to LocalStack and run the e2e suite there (needs Docker and a token)"

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	@test -n "$(PYTHON312)" || { echo "python3.12 not found (PATH or pyenv); set PYTHON312=/path/to/python3.12" >&2; exit 1; }
	$(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e clients/python
	touch $@

$(CHECKOV_ENV)/.installed:
	$(PYTHON312) -m venv $(CHECKOV_ENV)
	$(CHECKOV_ENV)/bin/pip install --quiet checkov==3.3.30
	touch $@

# aws-sam-cli pins its own boto3; keep it out of the project's environment.
$(TOOLS)/.installed:
	$(PYTHON312) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet aws-sam-cli==1.170.0
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The operator console's browser test (tests/e2e/test_console.py) drives Debian's Chromium through
# Playwright (no browser download). Installed here when missing: a Debian machine, as root.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "$(CHROMIUM) is missing and there is no apt-get: install Chromium" >&2; exit 1; }
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

deps: $(VENV)/.installed node_modules/.installed $(CHROMIUM)

dev: deps
	$(VENV)/bin/hybrid-counter-local

dev-built: deps sam-build
	$(VENV)/bin/hybrid-counter-local --built

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

unit: $(VENV)/.installed
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# test_localrun_built checks the sam build output.
integration: deps sam-build
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

e2e: deps
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

e2e-built: deps sam-build
	HC_E2E_TARGET=built $(PY) -m pytest $(E2E_BUILT) $(PYTEST_ARGS)

# The template against Checkov's CloudFormation policies (offline: no platform download). What
# it reports and why some checks are skipped: docs/operator-guide.md, "Security scan".
scan: $(CHECKOV_ENV)/.installed
	$(CHECKOV) -f template.yaml --framework cloudformation --compact --quiet --skip-download

# The documentation site (build/site/), strict: a broken link or page fails. The API reference
# is Swagger UI from node_modules (swagger-ui-dist), copied into the site: no CDN, works offline.
# NO_MKDOCS_2_WARNING silences Material for MkDocs' notice of its end of life (May 5, 2027) and
# its successor, Zensical: README.md, "More", says what that means here.
docs: $(VENV)/.installed node_modules/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

sam-validate: $(TOOLS)/.installed
	$(SAM) validate --lint

# sam build needs the runtime's exact interpreter first on PATH.
sam-build: $(TOOLS)/.installed
	PATH="$(dir $(PYTHON312)):$$PATH" $(SAM) build --cached

# The interleaving explorer mostly waits on DynamoDB Local, one call at a
# time: `make test` starts it first, in a pytest process (and a DynamoDB Local) of its own;
# the rest of the suite starts beside them at once: both need only the project's virtualenv and
# node_modules (DynamoDB Local), not SAM CLI, Checkov or the `sam build` output. The third
# process installs SAM CLI and Checkov (their own virtualenvs) while the two run, builds
# (`sam build`), runs test_localrun_built.py (the one test file that reads the build's output),
# then the checks (lint, types, docs, template, scan). The explorer's and the third process's
# output follow the rest's; any of the three failing fails the run. The explorer's
# organizations (test_org_interleavings.py) and the OpenAPI fuzzing (about a minute, with a
# local runtime of its own) ride with the explorer, and so do five slow integration files (the
# state machine, the split organization's concurrency, resizes across reshards, the events
# tail's long polls, the organizations' throttling bench, and the thirteenth session's usage keys
# and crowded reclaim page: about 160 s in all), so the two processes end about together
# (2026-11-27, thirteenth session: the rest 850 s, the explorer 865 s).
# Each prints its slowest tests (--durations), where the minutes to cut are.
EXPLORATION := tests/integration/test_interleavings.py tests/integration/test_org_interleavings.py \
	tests/e2e/test_fuzz_openapi.py tests/integration/test_stateful_counters.py \
	tests/integration/test_org_split.py tests/integration/test_review43_resize_reshard.py \
	tests/integration/test_ops_events_follow.py tests/integration/test_bench_orgs.py \
	tests/integration/test_review66_org_page.py tests/integration/test_org_usage_keys.py \
	tests/integration/test_review65_usage_keys_legacy.py
AFTER_BUILD := tests/integration/test_localrun_built.py

integration-built: deps sam-build
	$(PY) -m pytest $(AFTER_BUILD) $(PYTEST_ARGS)

test: deps
	@mkdir -p .local
	@$(PY) -m pytest $(EXPLORATION) --durations=10 $(PYTEST_ARGS) > .local/exploration.log 2>&1 & exploration=$$!; \
	$(MAKE) --no-print-directory lint typecheck docs sam-build integration-built sam-validate scan > .local/checks.log 2>&1 & checks=$$!; \
	$(PY) -m pytest tests $(addprefix --ignore=,$(EXPLORATION) $(AFTER_BUILD)) --durations=40 $(PYTEST_ARGS); rest=$$?; \
	wait $$checks; checked=$$?; \
	echo "---- lint typecheck docs sam-build $(AFTER_BUILD) sam-validate scan (exit $$checked) ----"; cat .local/checks.log; \
	wait $$exploration; explored=$$?; \
	echo "---- $(EXPLORATION) (exit $$explored) ----"; cat .local/exploration.log; \
	cat .local/explorer-figures.json .local/explorer-figures-organizations.json 2>/dev/null; \
	test $$rest -eq 0 -a $$explored -eq 0 -a $$checked -eq 0
	HC_E2E_TARGET=built $(PY) -m pytest $(E2E_BUILT) $(PYTEST_ARGS)

# Also rewrites docs/benchmarks.md and its plots (docs/bench/): the published figures are a run's.
bench: deps
	$(PY) -m benchmarks --docs docs

bench-local: deps
	$(PY) -m benchmarks.local_runtime

# Not part of `make test`: both need a Docker engine; each says why not and exits 2 without one.
sam-local: deps $(TOOLS)/.installed
	$(PY) -m tests.sam_local --check-docker
	$(MAKE) sam-build
	$(PY) -m tests.sam_local

localstack-e2e: deps $(TOOLS)/.installed
	$(PY) -m tests.localstack_e2e --preflight
	$(MAKE) sam-build
	$(PY) -m tests.localstack_e2e

clean:
	rm -rf $(VENV) $(TOOLS) $(CHECKOV_ENV) node_modules .aws-sam .pytest_cache .mypy_cache .ruff_cache
