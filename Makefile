# Two commands: `make run` serves the app on its embedded defaults, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 5000

.PHONY: run test test-scale soak bench venv migrate chromium pdf-libs pdf-test-tools tools axe clean

CATALOGS := $(patsubst %.po,%.mo,$(wildcard translations/*/LC_MESSAGES/messages.po))

venv: $(STAMP) $(CATALOGS)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# The Spanish catalog is compiled from its .po whenever that changes (git keeps only the .po).
translations/%/LC_MESSAGES/messages.mo: translations/%/LC_MESSAGES/messages.po $(STAMP)
	PYTHON=$(BIN)/python ./bin/compile-translations

migrate: $(STAMP) $(CATALOGS)
	$(BIN)/flask --app app db upgrade

run: migrate pdf-libs
	HOST=$(HOST) PORT=$(PORT) PATH="$(CURDIR)/$(BIN):$$PATH" ./bin/serve

chromium:
	./bin/ensure-chromium

# Debian's libraries WeasyPrint renders the ticket document with; the tests also read it back
# with poppler-utils.
pdf-libs:
	./bin/ensure-pdf-libs

pdf-test-tools:
	./bin/ensure-pdf-libs --test

# npm tools the tests run (the OpenAPI lint), pinned in tools/package-lock.json, kept in
# tools/node_modules (not in git).
TOOLS_STAMP := tools/node_modules/.installed
$(TOOLS_STAMP): tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --loglevel=error
	@touch $(TOOLS_STAMP)

tools: $(TOOLS_STAMP)

# axe-core (pinned in tests/a11y/package-lock.json) for the accessibility checks of the pages.
AXE := tests/a11y/node_modules/axe-core/axe.min.js
axe: $(AXE)

$(AXE): tests/a11y/package.json tests/a11y/package-lock.json
	npm ci --prefix tests/a11y --ignore-scripts --no-audit --no-fund
	@touch $(AXE)

# Two pytest-xdist workers a core, at most 16 (one Redis database each under test-scale):
# most tests wait on servers, sockets, throttled links and Chromium rather than compute. They
# are handed tests as they free up (TEST_WORKERS=0 runs in one process); tests marked `alone`
# run with no other beside them (tests/plugins/parallel.py). The 40 slowest set-ups, calls and
# tear-downs are listed at the end.
TEST_WORKERS ?= $(shell n=$$(( $$(nproc) * 2 )); echo $$(( n > 16 ? 16 : n )))
PARALLEL := -n $(TEST_WORKERS) --dist worksteal --durations=40

# The lint (ruff, rules in pyproject.toml) first: a finding fails the target before any test runs.
test: $(STAMP) $(CATALOGS) chromium pdf-test-tools tools axe
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(PARALLEL) $(PYTEST_ARGS)

# The whole suite again on PostgreSQL, Redis and an S3 bucket (moto), started on loopback; each
# worker has its own template database, Redis database and buckets.
test-scale: $(STAMP) $(CATALOGS) chromium pdf-test-tools tools axe
	MOTO_SERVER=$(BIN)/moto_server ./bin/with-scale-services $(BIN)/python -m pytest $(PARALLEL) $(PYTEST_ARGS)

# Benchmarks (not part of `make test`): p99 of the API and the review queue at 20 req/s with
# 1,000 and 100,000 tickets, capture page, capture on one bar, photos, approval, memory.
# Writes bench/RESULTS.md; takes about seven minutes (longer while a request cannot keep up
# with 20 a second). BENCH_ARGS="--seconds 3" for a quick look (bench/out/RESULTS.md).
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) $(CATALOGS) chromium pdf-libs
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# Long randomised reliability runs; their figures go into bench/RESULTS.md.
soak: $(STAMP) $(CATALOGS) pdf-test-tools
	$(BIN)/python -m pytest -m soak tests/soak $(PYTEST_ARGS)
	$(BIN)/python -m bench.soak

clean:
	rm -rf $(VENV) .pytest_cache tools/node_modules
