# Baton: the single entry point. `make dev` serves the engine locally, `make test` runs everything.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# The first Python >= 3.11 on PATH (Lambda runs 3.12; 3.11 is supported too).
BASE_PYTHON ?= $(shell for p in python3.12 python3.11 python3.13 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { command -v $$p; break; }; done)
STAMP := $(VENV)/.installed

.PHONY: help install dev test lint typecheck proto unit integration e2e infra bench layer synth clean browser screenshots toolchains sdks api-key

help:
	@echo "make dev    - install and serve Baton on http://127.0.0.1:$${BATON_PORT:-8080}"
	@echo "make test   - install and run lint, types and the whole test suite"
	@echo "make bench  - run the benchmarks (prints ratios against raw baselines)"
	@echo "make screenshots - write docs/img/ui-*.png (the execution viewer) with headless chromium"
	@echo "make layer  - build the Lambda layer;  make synth - synthesize the CDK app"

$(STAMP): pyproject.toml sdk/python/pyproject.toml
	@test -n "$(BASE_PYTHON)" || { echo "error: need Python >= 3.11 on PATH" >&2; exit 1; }
	@echo "==> creating $(VENV) with $(BASE_PYTHON)"
	@test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check uv==0.13.8
	@echo "==> installing baton, the worker SDK and dev tools (uv, compiled bytecode)"
	@$(VENV)/bin/uv pip install --python $(PY) --compile-bytecode --quiet \
		-e '.[dev]' -e sdk/python
	@touch $(STAMP)

install: $(STAMP)

dev: $(STAMP)
	@$(VENV)/bin/baton dev

lint: $(STAMP)
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@echo "==> import-linter (the dependency rule)"
	@$(VENV)/bin/lint-imports --no-cache

# The descriptor set the engine (baton.rpc) and the Python SDK load the proto's messages from.
proto: $(STAMP)
	@$(PY) proto/compile.py

typecheck: $(STAMP)
	@echo "==> mypy"
	@$(VENV)/bin/mypy

# The viewer's browser tests (tests/ui) drive Debian's chromium; installed here when the machine
# can (root with apt-get). Otherwise those tests alone are skipped, and pytest says so loudly.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "==> installing chromium (apt-get) for the browser tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
		|| echo "!!! could not install chromium: the browser tests (tests/ui) will be SKIPPED"; \
	else echo "!!! no chromium and no root apt-get: the browser tests (tests/ui) will be SKIPPED"; fi

# The worker SDKs in other languages need their toolchains; say at once which are missing, all of
# them, rather than fail half-way through the run.
toolchains:
	@missing=""; \
	command -v go >/dev/null 2>&1 || missing="$$missing\n  - Go >= 1.24 (go not found on PATH) for sdk/go"; \
	command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || missing="$$missing\n  - a JDK 17 or newer (java/javac not found on PATH) for sdk/java"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing\n  - Maven >= 3.8 (mvn not found on PATH) for sdk/java"; \
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing="$$missing\n  - Node.js >= 20 with npm (node/npm not found on PATH) for sdk/typescript"; \
	if [ -n "$$missing" ]; then \
	  printf "make test needs these toolchains, which this machine lacks:$$missing\n" >&2; \
	  printf "Install them (e.g. on Debian: apt-get install golang openjdk-17-jdk-headless maven nodejs npm) and run make test again.\n" >&2; \
	  exit 1; fi

# Each SDK's own gates and unit tests (sdk/<language>/Makefile, target check); their conformance
# workers then run in pytest (tests/conformance) against one baton dev.
SDK_LANGUAGES := go java typescript
sdks: toolchains $(STAMP)
	@for lang in $(SDK_LANGUAGES); do \
	  [ -f sdk/$$lang/Makefile ] || continue; \
	  echo "==> sdk/$$lang: lint and unit tests"; \
	  $(MAKE) --no-print-directory -C sdk/$$lang check || exit 1; done

test: toolchains lint typecheck browser sdks
	@echo "==> pytest"
	@# A temp dir of this checkout's own: pytest prunes /tmp/pytest-of-<user> to its newest three
	@# runs, which deletes the databases of another checkout's run in progress.
	@$(PY) -m pytest -n 2 --dist loadfile -q --basetemp=$(CURDIR)/.pytest-tmp $(PYTEST_ARGS)

# Screenshots of the viewer (runs list, a run) for the README, taken by the browser tests.
screenshots: $(STAMP) browser
	@BATON_SCREENSHOTS=1 $(PY) -m pytest -q -p no:cacheprovider --basetemp=$(CURDIR)/.pytest-tmp/shots \
		tests/ui/test_viewer.py -k "list or order_fulfilment"
	@ls -l docs/img/ui-*.png

bench: $(STAMP)
	@$(PY) bench/engine_throughput.py
	@$(PY) bench/queue_throughput.py
	@$(PY) bench/handler_overhead.py
	@$(PY) bench/sdk_throughput.py
	@$(PY) bench/http_throughput.py

layer: $(STAMP)
	@$(PY) layers/build.py

# A new API key for the HTTP API option (apiType=http): the key on stderr, its hashed entry for
# the ApiKeysSecretArn secret on stdout (docs/deploy.md).
api-key: $(STAMP)
	@test -n "$(NAME)" || { echo "usage: make api-key NAME=<who uses it>" >&2; exit 2; }
	@PYTHONPATH=functions/_lib $(PY) -m baton_lambda.api_keys "$(NAME)"

synth: $(STAMP) layer
	@$(PY) infra/app.py
	@$(VENV)/bin/cfn-lint -i W3005 -- cdk.out/*.template.json

clean:
	rm -rf $(VENV) cdk.out layers/build .pytest_cache .mypy_cache .ruff_cache
