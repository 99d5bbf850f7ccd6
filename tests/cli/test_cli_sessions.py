"""``agent-lab sessions list | show | export | delete``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import Invoke, copy_database, invoke_in

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A two-turn session recorded once per module: its home and its id."""
    source = tmp_path_factory.mktemp("sessions-home")
    result = invoke_in(source, "run", "Schedule a review tomorrow at 2pm Europe/Berlin", "--json")
    assert result.exit_code == 0, result.stderr
    session_id = str(json.loads(result.stdout.splitlines()[0])["session_id"])
    second = invoke_in(source, "run", "Now search for BM25", "--session", session_id)
    assert second.exit_code == 0, second.stderr
    return source, session_id


@pytest.fixture
def session_id(recorded: tuple[Path, str], home: Path) -> str:
    """The recorded session, copied into this test's own database."""
    source, session_id = recorded
    copy_database(source, home)
    return session_id


def test_list_shows_the_session_as_a_table_and_as_json(cli: Invoke, session_id: str) -> None:
    table = cli("sessions", "list")
    as_json = cli("sessions", "list", "--json")

    assert table.exit_code == 0 and as_json.exit_code == 0
    assert session_id in table.stdout
    assert "Schedule a review" in table.stdout
    [listed] = json.loads(as_json.stdout)
    assert listed["id"] == session_id and listed["turn_count"] == 2


def test_list_on_an_empty_database(cli: Invoke) -> None:
    result = cli("sessions", "list")

    assert result.exit_code == 0
    assert "no sessions yet" in result.stdout


def test_show_prints_transcript_turn_metrics_and_audit_timeline(
    cli: Invoke, session_id: str
) -> None:
    result = cli("sessions", "show", session_id)

    assert result.exit_code == 0, result.stderr
    assert "[1] user" in result.stdout and "[2] assistant" in result.stdout
    assert "Scheduled" in result.stdout  # the template confirmation is in the transcript
    assert "turns" in result.stdout and "wall ms" in result.stdout
    for event in ("session_started", "chat_round_started", "session_finished"):
        assert event in result.stdout


def test_export_json_holds_everything_recorded(cli: Invoke, session_id: str) -> None:
    result = cli("sessions", "export", session_id)

    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["session"]["id"] == session_id
    assert [m["role"] for m in record["messages"]][:2] == ["user", "assistant"]
    assert record["audit_logs"][0]["event"] == "session_started"
    assert len(record["usage"]["turns"]) == 2
    assert record["tool_batches"]


def test_export_jsonl_to_a_file(cli: Invoke, session_id: str, tmp_path: Path) -> None:
    target = tmp_path / "session.jsonl"

    result = cli("sessions", "export", session_id, "--format", "jsonl", "--out", str(target))

    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in target.read_text().splitlines()]
    kinds = {record["type"] for record in records}
    assert {"session", "message", "audit", "usage", "turn", "tool_batch"} <= kinds


def test_export_with_an_unknown_format_is_a_usage_error(cli: Invoke, session_id: str) -> None:
    result = cli("sessions", "export", session_id, "--format", "xml")

    assert result.exit_code == 2
    assert len(result.error_lines) == 1


def test_delete_asks_first_and_keeps_the_session_when_declined(
    cli: Invoke, session_id: str, store: Callable[[], SQLiteSessionStore]
) -> None:
    declined = cli("sessions", "delete", session_id, input="n\n")

    assert declined.exit_code == 0  # declining is an answer, not an error
    assert declined.error_lines == []
    assert declined.stdout.strip().endswith("nothing deleted")
    assert store().get_session(session_id) is not None


def test_delete_with_yes_removes_everything(
    cli: Invoke, session_id: str, store: Callable[[], SQLiteSessionStore]
) -> None:
    result = cli("sessions", "delete", session_id, "--yes")

    assert result.exit_code == 0, result.stderr
    assert store().get_session(session_id) is None


@pytest.mark.parametrize("command", ["show", "export", "delete"])
def test_unknown_session_is_one_usage_line(cli: Invoke, command: str) -> None:
    result = cli("sessions", command, "missing-id", "--yes" if command == "delete" else "--")

    assert result.exit_code == 2
    assert len(result.error_lines) == 1
    assert "unknown session id: 'missing-id'" in result.stderr


def test_sessions_in_a_real_process(cli_process: Invoke, session_id: str) -> None:
    result = cli_process("sessions", "list", "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["id"] == session_id
