# Two commands do all set-up on a fresh Debian machine with Python 3.11: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lanner-installed
# Where `make run` serves: `make run PORT=8080` (HOST=0.0.0.0 to be reachable from other machines).
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast lint system-test-deps browser-test-deps screenshots bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the machines' pip constraints cap it here, and a bare `torch` would pull a newer CUDA build
	$(BIN)/pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install -q -e '.[test,export]'
	touch $(STAMP)

# The demo prints the address it is served at (links, the export line): the same HOST and PORT, unless
# LANNER_PUBLIC_URL names another (a proxy in front).
run: $(STAMP)
	LANNER_PUBLIC_URL="$${LANNER_PUBLIC_URL:-http://$(HOST):$(PORT)}" $(BIN)/lanner demo
	LANNER_PUBLIC_URL="$${LANNER_PUBLIC_URL:-http://$(HOST):$(PORT)}" $(BIN)/lanner serve --host $(HOST) --port $(PORT)

# PostgreSQL (initdb, pg_ctl) for the tests that run the API against a real server; Redis for the rate limits
# shared by several server processes (tests/http/test_shared_limits.py starts its own); Azurite, the Azure Blob
# emulator, for tests/integrations/test_clouds.py (npm, under Debian's nodejs where no node is installed).
AZURITE_VERSION := 3.37.0
system-test-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null)
	@test -x /usr/bin/redis-server || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null)
	@command -v npm >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null)
	@command -v azurite-blob >/dev/null || \
		npm install -g --silent --no-audit --no-fund azurite@$(AZURITE_VERSION) >/dev/null

# Debian's chromium for the browser tests (tests/web, marker `browser`): Playwright drives it and never downloads one.
browser-test-deps:
	@test -x /usr/bin/chromium || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# Retake the screenshots in docs/screenshots (the README shows them) from the browser tests.
screenshots: $(STAMP) browser-test-deps
	LANNER_SCREENSHOTS=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m browser tests/web

lint: $(STAMP)
	$(BIN)/ruff check lanner tests benchmarks
	$(BIN)/lint-imports

# Two workers, each running whole test files (module fixtures once; tests that build on the one before keep their
# order): most tests wait on servers, trainers and browsers, so two of them share two cores well. The files go out
# longest first (tests/conftest.py orders them; xdist's reordering, most tests first, would undo that).
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, as container images often
# set): pytest keeps there the modules it rewrites for their asserts (tests, conftests, plugins: 440), and rewriting
# them all again cost each worker 4 s of CPU per run.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -p no:cacheprovider
test: $(STAMP) system-test-deps browser-test-deps lint
	$(PYTEST) -n 2 --dist loadfile --no-loadscope-reorder

# The edit-run loop: SQLite only, no browser, no real server or trainer (e2e), so no PostgreSQL, chromium or Ray
# to install, and 10 fuzz cases per API operation instead of 40 (tests/test_fuzz.py: it was the lane's longest
# file); `make test` stays the whole suite, at full count, and is what CI runs.
test-fast: $(STAMP)
	$(PYTEST) -n 2 --dist loadfile --no-loadscope-reorder -m "not e2e and not browser and not postgres" --fuzz-examples=10

bench: $(STAMP)
	@command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk >/dev/null)
	$(BIN)/python benchmarks/webhook_ingest.py

clean:
	rm -rf $(VENV) .lanner runs
