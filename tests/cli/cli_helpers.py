"""Shared helpers of the CLI tests (imported by ``conftest.py`` and the tests)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli import app

SCRUBBED = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "AGENT_LAB_MODEL",
    "AGENT_LAB_EVENT_MODEL",
    "AGENT_LAB_DB",
    "AGENT_LAB_DATABASE_URL",
    "AGENT_LAB_CORPUS",
    "AGENT_LAB_SEARCH_URL",
)


@dataclass(frozen=True)
class Result:
    """What one CLI invocation produced."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        """The non-empty stderr lines (stderr carries nothing but errors)."""
        return [line for line in self.stderr.splitlines() if line.strip()]


Invoke = Callable[..., Result]


def lab_env(home: Path, **extra: str | None) -> dict[str, str | None]:
    """The environment of one invocation: ``None`` removes a variable."""
    env: dict[str, str | None] = dict.fromkeys(SCRUBBED)
    env.update(AGENT_LAB_HOME=str(home), AGENT_LAB_SIM_FAST="1", COLUMNS="160")
    env.update(XDG_CONFIG_HOME=str(home / "xdg-config"))  # no user config file leaks in
    env.update(extra)
    return env


def process_env(home: Path, **extra: str | None) -> dict[str, str]:
    """``os.environ`` with the lab environment applied."""
    env = dict(os.environ)
    for name, value in lab_env(home, **extra).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def sessions_by_mode(store: SQLiteSessionStore) -> Mapping[str, Any]:
    """The persisted sessions keyed by mode (one per mode expected)."""
    return {session["mode"]: session for session in store.list_sessions()}


def invoke_in(home: Path, *args: str, input: str | None = None, **env: str | None) -> Result:
    """Run ``agent-lab`` in-process through typer's ``CliRunner`` on ``home``."""
    outcome = CliRunner().invoke(app, list(args), input=input, env=lab_env(home, **env))
    return Result(outcome.exit_code, outcome.stdout, outcome.stderr)


def copy_database(source_home: Path, target_home: Path) -> None:
    """Copy the session database of one home into another (SQLite's backup API)."""
    name = "agent-lab.sqlite3"
    with (
        closing(sqlite3.connect(source_home / name)) as source,
        closing(sqlite3.connect(target_home / name)) as target,
    ):
        source.backup(target)


def wait_for_lab_url(process: subprocess.Popen[str], timeout: float = 60) -> str:
    """The base URL (no trailing slash) that ``agent-lab serve`` prints once it listens.

    Raises:
        AssertionError: the process printed no URL within ``timeout`` or exited first.
    """
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("web lab on "):
            return line.split()[3].rstrip("/")
        if not line and process.poll() is not None:
            break
    raise AssertionError("the web lab did not start")
