"""``agent-lab demo``: both modes, persisted, compared, offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke, sessions_by_mode


def test_demo_fast_runs_both_modes_and_persists_both_sessions(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    result = cli("demo", "--fast")

    assert result.exit_code == 0, result.stderr
    sessions = sessions_by_mode(store())
    assert set(sessions) == {"dual_agent", "chat_agent_tools"}
    for session in sessions.values():
        assert session["turn_count"] == 4
        assert session["id"] in result.stdout
    for expected in ("visible TTFT", "model calls", "fallback calls", "tool count", "tokens"):
        assert expected in result.stdout
    assert "Goodbye" in result.stdout
    assert "⚡ event device.volume.adjust" in result.stdout
    assert "agent-lab sessions show" in result.stdout
    assert "agent-lab replay" in result.stdout
    assert "simulated model" in result.stdout


def test_demo_summary_counts_match_between_modes(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    assert cli("demo").exit_code == 0  # AGENT_LAB_SIM_FAST=1 in the environment
    opened = store()
    summaries = {
        mode: opened.usage_summary(session["id"])["session"]
        for mode, session in sessions_by_mode(opened).items()
    }
    assert summaries["dual_agent"]["tool_count"] == summaries["chat_agent_tools"]["tool_count"] == 4


def test_demo_ignores_a_configured_endpoint_and_honours_db(cli: Invoke, tmp_path: Path) -> None:
    database = tmp_path / "elsewhere.sqlite3"
    result = cli("demo", "--db", str(database), OPENAI_BASE_URL="http://127.0.0.1:9/v1")

    assert result.exit_code == 0, result.stderr
    with SQLiteSessionStore(database) as opened:
        assert len(opened.list_sessions()) == 2
    assert f"--db {database}" in result.stdout


def test_demo_in_a_real_process(cli_process: Invoke, home: Path) -> None:
    result = cli_process("demo", "--fast")

    assert result.exit_code == 0, result.stderr
    assert "dual_agent" in result.stdout and "chat_agent_tools" in result.stdout
    with SQLiteSessionStore(home / "agent-lab.sqlite3") as opened:
        assert len(opened.list_sessions()) == 2
