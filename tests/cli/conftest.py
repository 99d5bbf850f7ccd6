"""Fixtures of the CLI tests: a CliRunner and a real subprocess, on a temporary home.

Every invocation gets ``AGENT_LAB_HOME`` pointed at the test's own directory, a fast
simulated model (``AGENT_LAB_SIM_FAST=1``) and no endpoint or key from the caller's
environment.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke, Result, invoke_in, process_env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The test's data directory."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(home: Path) -> Invoke:
    """Run ``agent-lab`` in-process through typer's ``CliRunner``."""

    def invoke(*args: str, input: str | None = None, **env: str | None) -> Result:
        return invoke_in(home, *args, input=input, **env)

    return invoke


@pytest.fixture
def cli_process(home: Path) -> Invoke:
    """Run ``python -m agent_lab.interfaces.cli`` as a real subprocess."""

    def invoke(*args: str, input: str | None = None, **env: str | None) -> Result:
        completed = subprocess.run(
            [sys.executable, "-m", "agent_lab.interfaces.cli", *args],
            input=input,
            capture_output=True,
            text=True,
            env=process_env(home, **env),
            timeout=120,
        )
        return Result(completed.returncode, completed.stdout, completed.stderr)

    return invoke


@pytest.fixture
def store(home: Path) -> Iterator[Callable[[], SQLiteSessionStore]]:
    """Open the home's session database (after the CLI wrote it)."""
    opened: list[SQLiteSessionStore] = []

    def open_store() -> SQLiteSessionStore:
        opened.append(SQLiteSessionStore(home / "agent-lab.sqlite3"))
        return opened[-1]

    yield open_store
    for item in opened:
        item.close()
