# Two commands: `make run` serves the app on its embedded defaults, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: run test test-scale soak bench venv migrate chromium axe clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

migrate: $(STAMP)
	$(BIN)/flask --app app db upgrade

run: migrate
	HOST=$(HOST) PORT=$(PORT) PATH="$(CURDIR)/$(BIN):$$PATH" ./bin/serve

chromium:
	./bin/ensure-chromium

# axe-core (pinned in tests/a11y/package-lock.json) for the accessibility checks of the pages.
AXE := tests/a11y/node_modules/axe-core/axe.min.js
axe: $(AXE)

$(AXE): tests/a11y/package.json tests/a11y/package-lock.json
	npm ci --prefix tests/a11y --ignore-scripts --no-audit --no-fund
	@touch $(AXE)

test: $(STAMP) chromium axe
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The whole suite again on PostgreSQL and Redis, started on loopback for the run.
test-scale: $(STAMP) chromium axe
	./bin/with-scale-services $(BIN)/python -m pytest $(PYTEST_ARGS)

# Benchmarks (not part of `make test`): load, scale, capture page, photos, approval, memory.
# Writes bench/RESULTS.md; takes about seven minutes. BENCH_ARGS="--seconds 3 --rounds 1" for a quick look.
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) chromium
	./bench/ensure-wrk
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# Long randomised reliability runs; their figures go into bench/RESULTS.md.
soak: $(STAMP)
	$(BIN)/python -m pytest -m soak tests/soak $(PYTEST_ARGS)
	$(BIN)/python -m bench.soak

clean:
	rm -rf $(VENV) .pytest_cache
