.DEFAULT_GOAL := help
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# make test talks to the real services; these are the standard local ports.
TEST_ENV := DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/cowry} \
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:6379/0} \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-redis://127.0.0.1:6379/1}

.PHONY: help run test lint format check-services migrate

help:
	@echo "make run   - install, start PostgreSQL (embedded unless DATABASE_URL), migrate, seed, start web + worker + beat"
	@echo "make test  - lint, schema check and the whole suite (its own PostgreSQL and Redis unless DATABASE_URL/REDIS_URL)"

$(STAMP): pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	@touch $(STAMP)

# bin/run: the embedded PostgreSQL server (unless DATABASE_URL is set), migrate, seed, honcho.
run: $(STAMP)
	$(BIN)/python bin/run

check-services: $(STAMP)
	@$(TEST_ENV) $(BIN)/python bin/check_services.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# bin/test-services: the servers DATABASE_URL, REDIS_URL and CELERY_BROKER_URL name, or else
# its own (the embedded PostgreSQL under var/test-pg, a private redis-server), for test-steps.
test: $(STAMP) lint
	@$(BIN)/python bin/test-services $(MAKE) --no-print-directory test-steps

.PHONY: test-steps
test-steps: $(STAMP)
	@$(BIN)/python bin/check_services.py
	@bin/ensure_browser
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null
	$(DEPLOY_ENV) $(BIN)/python manage.py check --deploy --fail-level WARNING
	$(BIN)/python bin/pip_audit_gate.py
	$(BIN)/pytest --create-db $(PYTEST_ARGS)

# `check --deploy` under the production settings, with throwaway values for what they require.
DEPLOY_ENV := DJANGO_SETTINGS_MODULE=config.settings_production \
	SECRET_KEY=$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(64))') \
	WEBHOOK_SECRETS_KEYS=$$($(BIN)/python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())') \
	ALLOWED_HOSTS=api.cowry.example

# The dependency audit on its own, strict: fails when anything could not be audited.
.PHONY: audit
audit: $(STAMP)
	AUDIT_REQUIRED=1 $(BIN)/python bin/pip_audit_gate.py

# Proof under load (issue 9): not part of `make test`. See bench/README.md.
.PHONY: bench soak bench-worker bench-cpu

# BENCH_BASELINE=<commit>: the baseline's code and this tree's, in turns (bench/compare.py).
bench: $(STAMP)
	$(BIN)/pip install --quiet aiohttp py-spy pyinstrument
	$(BIN)/python bench/$(if $(BENCH_BASELINE),compare.py,run_bench.py)

soak: $(STAMP)
	$(BIN)/pip install --quiet aiohttp
	$(BIN)/python bench/soak.py

bench-worker: $(STAMP)
	$(BIN)/pip install --quiet aiohttp
	$(BIN)/python bench/worker_cost.py

# In-process CPU and SQL statements per operation; BENCH_BASELINE=<commit> side by side.
bench-cpu: $(STAMP)
	$(BIN)/pip install --quiet aiohttp
	$(BIN)/python bench/cpu.py
