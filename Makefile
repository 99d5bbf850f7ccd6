# Agent Lab — one-command setup for a fresh machine (Python >= 3.11 and make).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser postgres demo test test-slow test-local test-otel test-scale phoenix local-wheel contract lint typecheck bench clean

# Each step prints one line; pip shows what it fetches (the first run takes a few minutes).
## --retries 10: a registry that resets connections for a minute does not fail a setup.
PIP := $(BIN)/python -m pip install --progress-bar on --retries 10
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

## Debian's PostgreSQL server binaries (the store conformance and scale tests start
## throwaway servers with them); installed when missing, as root.
postgres:
	scripts/ensure-postgres

## The benchmark suite (writes bench/RESULTS.md).
bench: setup
	@echo "==> installing the benchmark extra"
	@$(PIP) --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

## The main job: the offline demo of both tool modes on the simulated model.
demo: setup
	$(BIN)/agent-lab demo

## The project's test suite on parallel workers (a file's tests stay on one worker). The web
## lab's browser tests need /usr/bin/chromium; without it they are skipped with a note,
## unless AGENT_LAB_REQUIRE_BROWSER=1 (CI) makes that a failure.
## One worker more than the machine has cores: a good part of the suite waits on
## subprocesses, servers and the browser, and the extra worker keeps the cores busy
## (3:20 instead of 4:00 on 2 cores).
PYTEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")
test: setup browser postgres
	@echo "==> running the test suite ($(PYTEST_WORKERS) workers)"
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile

## The long tests left out of `make test` (-m slow): the SIGKILL and effect campaigns and
## the packaging builds. CI runs them right after `make test`.
test-slow: setup postgres
	@echo "==> running the slow tests ($(PYTEST_WORKERS) workers)"
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m slow

## The scale stage: N web workers on PostgreSQL (one killed mid-turn, a session handed
## between live workers) and campaigns on a local Ray instance; not in `make test`.
test-scale: setup postgres
	@echo "==> installing the postgres and ray extras"
	@$(PIP) --quiet -e '.[dev,postgres,ray]'
	$(BIN)/python -m pytest -m scale tests/scale

## The end-to-end tests on a real small model. Installing the extra builds llama.cpp
## from source (a few minutes) unless `make local-wheel` has already built the wheel.
LOCAL_WHEELS ?= .local-wheels
## llama.cpp's default build tunes for the building CPU (-march=native), and on some
## virtual machines that picks instructions the CPU advertises but the VM refuses
## (AMX, AVX-512: the server dies with SIGILL on its first request). On x86-64 the wheel
## is built for AVX2/FMA/F16C instead, which runs on any x86-64-v3 CPU. Set CMAKE_ARGS
## yourself to choose other flags.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
else
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
endif
export CMAKE_ARGS ?= $(LLAMA_CMAKE_ARGS)
## Only build the llama.cpp wheel into $(LOCAL_WHEELS), touching no environment (CI
## builds it in the background while the suite runs).
## --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS, so a cached wheel could
## be one built with other flags.
LOCAL_WHEEL_STAMP := $(LOCAL_WHEELS)/.built
$(LOCAL_WHEEL_STAMP): | $(STAMP)
	@echo "==> building the llama.cpp wheel into $(LOCAL_WHEELS) (CMAKE_ARGS=$(CMAKE_ARGS))"
	@rm -rf $(LOCAL_WHEELS)
	@$(BIN)/python -m pip wheel --no-cache-dir --no-deps --progress-bar off --retries 10 -w $(LOCAL_WHEELS) \
		"$$($(BIN)/python scripts/extra-requirement local llama-cpp-python)"
	@touch $(LOCAL_WHEEL_STAMP)

local-wheel: $(LOCAL_WHEEL_STAMP)

$(LOCAL_STAMP): $(STAMP) $(LOCAL_WHEEL_STAMP)
	@echo "==> installing the local-model extra with the llama.cpp wheel of $(LOCAL_WHEELS)"
	@$(PIP) $(LOCAL_WHEELS)/llama_cpp_python-*.whl
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
	@$(PHOENIX_VENV)/bin/python -m pip install --progress-bar on --retries 10 --quiet \
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
	rm -rf $(VENV) $(PHOENIX_VENV) $(LOCAL_WHEELS) build *.egg-info
