# Agent Lab — one-command setup for a fresh machine (Python >= 3.11 and make).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser demo test test-local test-otel phoenix contract lint typecheck bench clean

# Each step prints one line; pip shows what it fetches (the first run takes a few minutes).
PIP := $(BIN)/python -m pip install --progress-bar on
LOCAL_STAMP := $(VENV)/.installed-local

$(STAMP): pyproject.toml
	@echo "==> [1/3] creating the virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [2/3] upgrading pip"
	@$(PIP) --quiet --upgrade pip
	@echo "==> [3/3] installing agent-lab with its test tools (pip's cache makes reruns quick)"
	@$(PIP) -e '.[dev]'
	@touch $(STAMP)
	@echo "==> setup done"

setup: $(STAMP)

browser:
	scripts/ensure-chromium

## The benchmark suite (writes bench/RESULTS.md).
bench: setup
	@echo "==> installing the benchmark extra"
	@$(PIP) --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

## The main job: the offline demo of both tool modes on the simulated model.
demo: setup
	$(BIN)/agent-lab demo

## The project's test suite on two workers (a file's tests stay on one worker). The web
## lab's browser tests need /usr/bin/chromium; without it they are skipped with a note,
## unless AGENT_LAB_REQUIRE_BROWSER=1 (CI) makes that a failure.
PYTEST_WORKERS ?= 2
test: setup browser
	@echo "==> running the test suite ($(PYTEST_WORKERS) workers)"
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile

## The end-to-end tests on a real small model (builds llama.cpp once; pip caches it).
## pip keeps the llama.cpp wheel it builds in its cache, so only the first build is slow.
$(LOCAL_STAMP): $(STAMP)
	@echo "==> installing the local-model extra (builds llama.cpp once; pip caches the wheel)"
	@$(PIP) -e '.[dev,local]'
	@touch $(LOCAL_STAMP)

test-local: $(LOCAL_STAMP)
	$(BIN)/python -m pytest -m local_llm

## The OpenTelemetry export against a real Arize Phoenix server. Phoenix gets its own
## environment (.venv-phoenix, about 850 MB): it needs openai 3, Agent Lab openai < 3.
PHOENIX_VENV ?= .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
$(PHOENIX_STAMP): tests/telemetry/phoenix-requirements.txt
	@echo "==> installing Arize Phoenix for the OpenTelemetry tests in $(PHOENIX_VENV)"
	$(PYTHON) -m venv $(PHOENIX_VENV)
	@$(PHOENIX_VENV)/bin/python -m pip install --progress-bar on --quiet \
		-r tests/telemetry/phoenix-requirements.txt
	@touch $(PHOENIX_STAMP)

## Only the Phoenix environment (CI builds it in the background while the suite runs).
phoenix: $(PHOENIX_STAMP)

test-otel: setup $(PHOENIX_STAMP)
	@echo "==> exporting turns to a real Arize Phoenix server and reading them back"
	AGENT_LAB_PHOENIX=$(PHOENIX_VENV)/bin/phoenix $(BIN)/python -m pytest -m phoenix tests/telemetry

## The product owner's contract suite (needs ../shared).
contract: setup
	PYTHON=$(BIN)/python ../shared/contract/run

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: setup
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) build *.egg-info
