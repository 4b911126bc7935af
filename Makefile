# One command sets up and tests everything: `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test install lint typecheck unit bench clean docs docs-serve serve frontend-clients conformance mutation

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

unit: $(STAMP) frontend-clients conformance
	$(BIN)/pytest

test: lint typecheck unit

# The real front-end clients the tests drive (tests/server/frontends): @ag-ui/client and ai@6 from the
# committed lockfile (npm's cache makes a re-install cheap), Debian's chromium + chromium-driver. Missing
# and not installable is a failure, never a skip.
JS_STAMP := tests/js/node_modules/.package-lock.json

$(JS_STAMP): tests/js/package-lock.json
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' \
		|| { echo "Node.js 20+ and npm are required for the front-end client tests" >&2; exit 1; }
	cd tests/js && npm ci --no-audit --no-fund
	touch $(JS_STAMP)

frontend-clients: $(JS_STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		|| { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		|| { echo "chromium and chromium-driver are required (apt-get install chromium chromium-driver)" >&2; exit 1; }

# The official MCP conformance suite (tests/mcp/test_conformance.py): @modelcontextprotocol/conformance from
# the committed lockfile in tests/conformance, with the Node.js 22 it needs as the pinned npm package `node`
# (the suite does not run on Node 20). Missing and not installable is a failure, never a skip.
CONFORMANCE_STAMP := tests/conformance/node_modules/.package-lock.json

$(CONFORMANCE_STAMP): tests/conformance/package-lock.json
	@command -v npm >/dev/null || { echo "npm is required for the MCP conformance suite" >&2; exit 1; }
	cd tests/conformance && npm ci --no-audit --no-fund
	touch $(CONFORMANCE_STAMP)

conformance: $(CONFORMANCE_STAMP)

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/registry.py
	$(BIN)/python bench/executor.py
	$(BIN)/python bench/agent.py
	$(BIN)/python bench/langgraph.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/mcp.py
	$(BIN)/python bench/service.py
	$(BIN)/python bench/import_time.py

# Mutation testing of the security-critical modules ([tool.mutmut] in pyproject.toml; docs/mutation.md).
# Slow (tens of minutes), so not part of `make test`. MUTANTS="toolrun.store._memory.*" narrows the run.
MUTANTS ?=
mutation: $(STAMP)
	$(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/mutmut results

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The task assistant on http://$(HOST):$(PORT) (SQLite in ./toolrun.db; user "demo" and its sign-in link
# on first run). Installs only what serving needs (the [server] extra), not the dev toolchain; a .venv
# made by `make test` is reused as it is. Settings: TOOLRUN_* in the environment or .env (docs/service.md).
HOST ?= 127.0.0.1
PORT ?= 8000
SERVE_STAMP := $(VENV)/.served

$(SERVE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[server]'
	touch $(SERVE_STAMP)

serve: $(SERVE_STAMP)
	$(BIN)/toolrun db upgrade
	$(BIN)/toolrun serve --host $(HOST) --port $(PORT) --demo-user demo

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis site
