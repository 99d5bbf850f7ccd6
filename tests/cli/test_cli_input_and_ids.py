"""``run -`` and ``run --file``; session id prefixes; ``sessions list`` filters,
``--jsonl`` and ``sessions prune``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke, process_env


def session_of(stdout: str) -> str:
    return str(json.loads(stdout.splitlines()[0])["session_id"])


def test_run_dash_reads_the_message_from_stdin(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    result = cli("run", "-", "--json", input="Please set the volume to 35\n")

    assert result.exit_code == 0, result.stderr
    [turn] = store().usage_summary(session_of(result.stdout))["turns"]
    assert turn["user_message"].strip() == "Please set the volume to 35"


@pytest.mark.parametrize(
    "text",
    [
        "Please summarise this. " + "lorem ipsum dolor sit amet " * 40_000,
        "x" * 1_100_000,  # one word the simulated model cannot echo whole
    ],
    ids=["words", "one-long-word"],
)
def test_run_file_sends_a_one_megabyte_message(
    home: Path, tmp_path: Path, store: Callable[[], SQLiteSessionStore], text: str
) -> None:
    message = tmp_path / "big.txt"
    message.write_text(text, encoding="utf-8")
    assert len(text.encode()) > 1_000_000

    completed = subprocess.run(
        [sys.executable, "-m", "agent_lab", "run", "--file", str(message), "--json"],
        capture_output=True,
        text=True,
        env=process_env(home),
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    [turn] = store().usage_summary(session_of(completed.stdout))["turns"]
    assert turn["user_message"] == text


def test_run_with_both_a_message_and_a_file_is_a_usage_error(cli: Invoke, tmp_path: Path) -> None:
    message = tmp_path / "m.txt"
    message.write_text("hi")

    both = cli("run", "hi", "--file", str(message))
    missing = cli("run", "--file", str(tmp_path / "nope.txt"))

    assert both.exit_code == 2 and both.error_lines[0].startswith("error: give the message")
    assert missing.exit_code == 2 and len(missing.error_lines) == 1


@pytest.fixture
def two_sessions(cli: Invoke, home: Path) -> list[str]:
    """Two sessions whose ids share their first characters (ids rewritten)."""
    ids = []
    for text in ("Turn the volume up by 5", "Search for SQLite WAL"):
        result = cli("run", text, "--json", "--mode", "chat_agent_tools")
        assert result.exit_code == 0, result.stderr
        ids.append(session_of(result.stdout))
    new_ids = ["abc123" + "0" * 26, "abc456" + "0" * 26]
    with sqlite3.connect(home / "agent-lab.sqlite3") as connection:
        connection.execute("PRAGMA foreign_keys = OFF")
        tables = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for old, new in zip(ids, new_ids, strict=True):
            connection.execute("UPDATE sessions SET id = ? WHERE id = ?", (new, old))
            for table in tables:
                columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
                if "session_id" in columns:
                    connection.execute(
                        f"UPDATE {table} SET session_id = ? WHERE session_id = ?", (new, old)
                    )
    return new_ids


def test_a_unique_prefix_stands_for_the_session_everywhere(
    cli: Invoke, two_sessions: list[str], tmp_path: Path
) -> None:
    first = two_sessions[0]

    shown = cli("sessions", "show", "abc1")
    exported = cli("sessions", "export", "abc1")
    continued = cli("run", "And down by 5", "--session", "abc1", "--json")
    chatted = cli("chat", "--session", "abc1", input="And up by 3\n")
    replayed = cli("replay", "abc1", "--speed", "0", "--quiet", "--ignore-key", "previous")
    deleted = cli("sessions", "delete", "abc1", "--yes")

    assert shown.exit_code == 0 and first in shown.stdout
    assert json.loads(exported.stdout)["session"]["session_id"] == first
    assert continued.exit_code == 0 and session_of(continued.stdout) == first
    assert chatted.exit_code == 0 and f"session {first}" in chatted.stdout
    assert replayed.exit_code == 0, replayed.stdout
    assert deleted.exit_code == 0 and f"deleted session {first}" in deleted.stdout


def test_an_ambiguous_prefix_lists_the_candidates(cli: Invoke, two_sessions: list[str]) -> None:
    for args in (("sessions", "show", "abc"), ("run", "hi", "--session", "abc")):
        result = cli(*args)
        assert result.exit_code == 2, args
        [line] = result.error_lines
        assert "ambiguous" in line
        assert two_sessions[0] in line and two_sessions[1] in line


def test_list_filters_by_mode_and_status_and_limits(cli: Invoke) -> None:
    for args in (("--mode", "chat_agent_tools"), ("--mode", "dual_agent"), ()):
        assert cli("run", "Turn the volume up by 5", *args).exit_code == 0
    assert cli("run", "Goodbye, that is all", "--mode", "dual_agent").exit_code == 0

    def listed(*args: str) -> list[dict[str, object]]:
        result = cli("sessions", "list", "--jsonl", *args)
        assert result.exit_code == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]

    everything = listed()
    assert len(everything) == 4
    assert [s["mode"] for s in listed("--mode", "chat_agent_tools")] == ["chat_agent_tools"]
    assert len(listed("--mode", "dual_agent")) == 3
    assert [s["id"] for s in listed("--limit", "2")] == [s["id"] for s in everything[:2]]
    terminated = listed("--status", "terminated")
    assert [s["id"] for s in terminated] == [everything[0]["id"]]
    assert len(listed("--status", "completed")) == 3
    assert listed("--status", "failed") == []
    bad = cli("sessions", "list", "--status", "weird")
    assert bad.exit_code == 2 and "unknown status" in bad.stderr


def test_prune_deletes_old_sessions_after_asking(
    cli: Invoke, home: Path, store: Callable[[], SQLiteSessionStore]
) -> None:
    old = session_of(cli("run", "An old question", "--json").stdout)
    new = session_of(cli("run", "A new question", "--json").stdout)
    with sqlite3.connect(home / "agent-lab.sqlite3") as connection:
        connection.execute(
            "UPDATE sessions SET updated_at = ?, created_at = ? WHERE id = ?",
            ("2020-01-01T00:00:00.000+00:00", "2020-01-01T00:00:00.000+00:00", old),
        )

    declined = cli("sessions", "prune", "--older-than", "7d", input="n\n")
    assert declined.exit_code == 0 and "nothing deleted" in declined.stdout
    assert store().get_session(old) is not None

    pruned = cli("sessions", "prune", "--older-than", "12h", "--yes")
    assert pruned.exit_code == 0, pruned.stderr
    assert "deleted 1 session(s)" in pruned.stdout
    assert store().get_session(old) is None
    assert store().get_session(new) is not None

    bad = cli("sessions", "prune", "--older-than", "soon")
    assert bad.exit_code == 2 and "7d" in bad.stderr
