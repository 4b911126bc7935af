# One command sets up and tests everything: `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test install lint typecheck unit bench clean serve

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy src

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/registry.py
	$(BIN)/python bench/executor.py
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/service.py

# The task assistant on http://127.0.0.1:8000 (SQLite in ./toolrun.db; user "demo" and its sign-in link
# on first run). Settings: TOOLRUN_* in the environment or .env (docs/service.md).
serve: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[server]'
	$(BIN)/toolrun db upgrade
	$(BIN)/toolrun serve --host 127.0.0.1 --port 8000 --demo-user demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
