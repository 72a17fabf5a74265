# Lead-generation back office. `make help` lists the targets.
#
#   make run [PORT=8123]     local PostgreSQL + Redis kept under var/, stand-ins of every outside service, the demo office, every process via honcho
#   make test [PYTEST_ARGS=...] [TEST_WORKERS=3]   ruff, import contracts, deptry, then pytest on workers, each with throwaway PostgreSQL + Redis
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
# uv installs the pinned requirements in a few seconds where pip takes about a minute: most of a fresh clone's
# set-up time for `make run` and `make test`. pip only installs uv itself. Compiled at install, as pip does:
# where PYTHONDONTWRITEBYTECODE is set, every process would otherwise compile each module it imports.
UV_VERSION := 0.13.9
INSTALL := $(BIN)/uv pip install --compile-bytecode --python $(BIN)/python
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: help .venv install install-dev install-bench run test lint bench bench-jobs bench-intake bench-sources bench-redaction bench-imap bench-imap-hostile bench-sync bench-backoffice bench-blog bench-chat bench-mcp bench-sse bench-scale bench-privacy reliability cluster-test clean

help:
	@echo "make install      runtime venv (.venv, requirements.txt)"
	@echo "make install-dev  plus test/lint tools (requirements-dev.txt)"
	@echo "make run          local PostgreSQL + Redis under var/, stand-ins, demo office, every process on http://127.0.0.1:$(PORT)/"
	@echo "make test         ruff, system packages, pytest on TEST_WORKERS (3) workers, each with throwaway PostgreSQL + Redis (PYTEST_ARGS=...)"
	@echo "make lint         ruff, import-linter contracts, deptry"
	@echo "make bench        every benchmark in turn, then one table of figures, baselines and targets in bench/README.md (QUICK=1: smallest sizes, table printed only)"
	@echo "make bench-jobs   jobs benchmark with throwaway PostgreSQL + Redis"
	@echo "make bench-intake POST /api/leads vs a bare insert on daphne, throwaway PostgreSQL + Redis"
	@echo "make bench-sources  signed generic-JSON webhooks to leads vs POST /api/leads on daphne, throwaway PostgreSQL + Redis"
	@echo "make bench-redaction  redaction recall/precision/speed against Presidio and scrubadub"
	@echo "make bench-imap   5,000 lead emails from a local dovecot, end to end vs django-mailbox's importer"
	@echo "make bench-imap-hostile  the slowest of a set of hostile emails through the parser, vs the unbounded one"
	@echo "make bench-sync   daily CRM sync: 10,000 pending among 1,000,000 users vs among 10,000"
	@echo "make bench-sse    1,000 prototype progress streams on one daphne vs a bare async relay"
	@echo "make bench-scale  1 web process vs 2 behind nginx (intake, prototype streams), and nginx vs straight"
	@echo "make bench-backoffice  admin dashboard and lists on 100,000 leads/tasks, 1,000,000 jobs vs stock changelists"
	@echo "make bench-chat   200 chats through the relay on daphne vs the floor (a minimal relay view) and a direct WebSocket client; 20 chats/s open loop for 60 s; 2 web processes vs 1"
	@echo "make bench-mcp    search_docs calls through our MCP server vs the bare SDK server, 50 clients"
	@echo "make bench-blog   GET /api/posts on a warm cache vs a bare view, and a 500-request cold burst, on daphne + Redis"
	@echo "make bench-privacy  export and erasure of a person with 10,000 timeline events and 1,000 jobs, among 1,000,000 jobs"
	@echo "make reliability  fault-injection suite at full scale (1,000 leads a scenario), figures in var/reliability/"
	@echo "make cluster-test  web, worker and data hosts in network namespaces behind nginx (root), a host killed mid-run, figures in var/cluster/"
	@echo "make clean        remove var/ and caches (keeps .venv)"

# --- virtualenv: an install runs again only when a requirements file changed --------------
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(PIP) install uv==$(UV_VERSION)

$(VENV)/.stamp-requirements: requirements.txt | $(BIN)/uv
	$(INSTALL) -r requirements.txt
	@touch $@

$(VENV)/.stamp-requirements-dev: requirements-dev.txt requirements.txt | $(BIN)/uv
	$(INSTALL) -r requirements-dev.txt
	@touch $@ $(VENV)/.stamp-requirements

.venv install: $(VENV)/.stamp-requirements

install-dev: $(VENV)/.stamp-requirements-dev

# --- the whole system on one machine ---------------------------------------------------------
# The stand-ins need the dev requirements (werkzeug); the data stays in var/ between runs.
run: install-dev
	scripts/install-system-deps
	PORT=$(PORT) scripts/with-services --data $${DATA_DIR:-var}/services scripts/run

# --- checks --------------------------------------------------------------------------------
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/deptry .

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/deptry .
	scripts/install-system-deps
	$(BIN)/python scripts/pytest-workers $(PYTEST_ARGS)

# The baselines and load tools the benchmarks compare against.
install-bench: install-dev
	$(INSTALL) -r requirements-bench.txt

# Each benchmark as its own target runs it, one after another; QUICK=1 for the smallest sizes.
bench: install-bench
	scripts/install-system-deps
	$(BIN)/python bench/all.py $(if $(QUICK),--quick)

bench-jobs: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/jobs/run.py

bench-intake: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/intake/run.py

bench-sources: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/sources/run.py

bench-redaction: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/tracking/redaction/run.py

bench-imap: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/imap/run.py

bench-imap-hostile: install-dev
	$(BIN)/python bench/imap/hostile.py

bench-sync: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/tracking/sync/run.py

bench-sse: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/sse/run.py

bench-scale: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/scale/run.py

bench-backoffice: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/backoffice/run.py

bench-chat: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/chat/run.py

bench-mcp: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/mcp/run.py

bench-blog: install-bench
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/blog/run.py

bench-privacy: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/privacy/run.py

reliability: install-dev
	scripts/install-system-deps
	RELIABILITY_SCALE=full scripts/with-services $(BIN)/pytest -p no:randomly -q -s --timeout 7200 tests/reliability/test_fault_suite.py $(PYTEST_ARGS)

# tests/cluster starts its own PostgreSQL, Redis and hosts; with-services only serves pytest's own settings.
cluster-test: install-dev
	scripts/install-system-deps
	CLUSTER_SCALE=full scripts/with-services $(BIN)/pytest -p no:randomly -q -s --timeout 3600 tests/cluster/test_cluster.py $(PYTEST_ARGS)

clean:
	rm -rf var/ .pytest_cache/ .ruff_cache/ .hypothesis/
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
