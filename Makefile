# Agent Lab — one-command setup for a fresh machine (Python >= 3.11 and make).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test contract lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

## The main job: the offline demo of both tool modes on the simulated model.
demo: setup
	$(BIN)/agent-lab demo

## The project's test suite.
test: setup
	$(BIN)/python -m pytest

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
