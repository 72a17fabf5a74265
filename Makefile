# Lead-generation back office. `make help` lists the targets.
#
#   make run [PORT=8123]     zero-setup run: SQLite + filesystem broker, web/worker/beat via honcho
#   make test [PYTEST_ARGS=...]   ruff, then pytest against throwaway PostgreSQL + Redis
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
PORT ?= 8000
PYTEST_ARGS ?=

.PHONY: help .venv install install-dev run test lint bench-jobs bench-intake bench-redaction bench-imap bench-sync clean

help:
	@echo "make install      runtime venv (.venv, requirements.txt)"
	@echo "make install-dev  plus test/lint tools (requirements-dev.txt)"
	@echo "make run          migrate, demo data, then web + worker + beat on http://127.0.0.1:$(PORT)/ (PORT=...)"
	@echo "make test         ruff, system packages, pytest with throwaway PostgreSQL + Redis (PYTEST_ARGS=...)"
	@echo "make lint         ruff check"
	@echo "make bench-jobs   jobs benchmark with throwaway PostgreSQL + Redis"
	@echo "make bench-intake POST /api/leads vs a bare insert on daphne, throwaway PostgreSQL + Redis"
	@echo "make bench-redaction  redaction recall/precision/speed against Presidio and scrubadub"
	@echo "make bench-imap   5,000 lead emails from a local dovecot, end to end vs django-mailbox's importer"
	@echo "make bench-sync   daily CRM sync: 10,000 pending among 1,000,000 users vs among 10,000"
	@echo "make clean        remove var/ and caches (keeps .venv)"

# --- virtualenv: pip runs again only when a requirements file changed ------------------
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.stamp-requirements: requirements.txt | $(BIN)/python
	$(PIP) install -r requirements.txt
	@touch $@

$(VENV)/.stamp-requirements-dev: requirements-dev.txt requirements.txt | $(BIN)/python
	$(PIP) install -r requirements-dev.txt
	@touch $@ $(VENV)/.stamp-requirements

.venv install: $(VENV)/.stamp-requirements

install-dev: $(VENV)/.stamp-requirements-dev

# --- zero-setup run ------------------------------------------------------------------------
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py createcachetable
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py sync_schedules
	$(BIN)/python manage.py load_demo
	@echo
	@echo "  App:       http://127.0.0.1:$(PORT)/"
	@echo "  Admin:     http://127.0.0.1:$(PORT)/admin/"
	@echo "  API docs:  http://127.0.0.1:$(PORT)/api/docs/"
	@echo "  Readiness: http://127.0.0.1:$(PORT)/readyz"
	@echo "  Login:     demo / demo-password"
	@echo "  Ctrl-C stops web, worker and beat."
	@echo
	PORT=$(PORT) exec $(BIN)/honcho start -f Procfile -p $(PORT)

# --- checks --------------------------------------------------------------------------------
lint: install-dev
	$(BIN)/ruff check .

test: install-dev
	$(BIN)/ruff check .
	scripts/install-system-deps
	scripts/with-services $(BIN)/pytest $(PYTEST_ARGS)

bench-jobs: install-dev
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/jobs/run.py

bench-intake: install-dev
	$(PIP) install -r requirements-bench.txt
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/intake/run.py

bench-redaction: install-dev
	$(PIP) install -r requirements-bench.txt
	$(BIN)/python bench/tracking/redaction/run.py

bench-imap: install-dev
	$(PIP) install -r requirements-bench.txt
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/imap/run.py

bench-sync: install-dev
	$(PIP) install -r requirements-bench.txt
	scripts/install-system-deps
	scripts/with-services $(BIN)/python bench/tracking/sync/run.py

clean:
	rm -rf var/ .pytest_cache/ .ruff_cache/ .hypothesis/
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
