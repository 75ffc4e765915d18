PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-slow test-fast demo lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	bash scripts/ensure-java.sh
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-chromium.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# The suite mostly waits (brokers, workers, Spark and PostgreSQL are subprocesses), so it
# runs in 4 pytest-xdist workers even on 2 cores. Tests marked with the same xdist_group
# (Spark, the timing-sensitive ones, modules with an expensive module-scoped fixture) run
# one after another on one worker. XDIST= (empty) runs the suite in one process.
XDIST ?= -n 4 --dist loadgroup

test: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy src
	$(BIN)/python -m pytest -q -m "not slow" $(XDIST) tests

# The full-size soak/chaos variants (100,000-record copier, longer Spark kills).
test-slow: install
	ONCELOG_SLOW=1 $(BIN)/python -m pytest -q $(XDIST) tests

test-fast: install
	$(BIN)/python -m pytest -q tests/unit

demo: install
	$(BIN)/oncelog demo

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy src

bench: install
	$(BIN)/python bench/produce.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
