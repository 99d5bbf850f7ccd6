"""``agent-lab sessions list | show | export | delete``."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.cli.cli_helpers import Invoke, copy_database, invoke_in, process_env
from tests.store.store_support import unwritable
from tests.web.busy_holder import Holder, holder_answers


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


def test_show_prints_turns_turn_metrics_and_audit_timeline(cli: Invoke, session_id: str) -> None:
    result = cli("sessions", "show", session_id)

    assert result.exit_code == 0, result.stderr
    assert "turn 1 · completed" in result.stdout and "turn 2 · completed" in result.stdout
    assert "you› Schedule a review" in result.stdout and "assistant›" in result.stdout
    assert "Scheduled" in result.stdout  # the template confirmation is in its round
    assert "turns" in result.stdout and "wall ms" in result.stdout
    for event in ("session_started", "chat_round_started", "session_finished"):
        assert event in result.stdout


def test_export_json_holds_everything_recorded(cli: Invoke, session_id: str) -> None:
    result = cli("sessions", "export", session_id)

    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["export_version"] == 1 and record["record_version"] == 1
    assert record["session"]["session_id"] == session_id
    assert [m["role"] for m in record["messages"]][:2] == ["user", "assistant"]
    assert [turn["turn_index"] for turn in record["turns"]] == [1, 2]
    [first, _] = record["records"]
    assert first["tool_executions"][0]["event_name"] == "calendar.schedule.create"
    assert first["tool_executions"][0]["status"] == "succeeded"
    assert record["cost"]["total_usd"] is None  # the simulated model has no price


def test_export_jsonl_to_a_file(cli: Invoke, session_id: str, tmp_path: Path) -> None:
    target = tmp_path / "session.jsonl"

    result = cli("sessions", "export", session_id, "--format", "jsonl", "--out", str(target))

    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in target.read_text().splitlines()]
    kinds = [record["kind"] for record in records]
    assert kinds[0] == "session" and kinds[-1] == "cost"
    assert {"session", "turn", "message", "record", "cost"} == set(kinds)
    assert kinds.count("record") == kinds.count("turn") == 2


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


def _delete_process(home: Path, *args: str, stdin: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "sessions", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )


@pytest.mark.parametrize("command", ["delete", "prune"])
def test_no_answer_at_the_end_of_input_declines(
    home: Path, session_id: str, store: Callable[[], SQLiteSessionStore], command: str
) -> None:
    args = [session_id] if command == "delete" else ["--older-than", "0s"]
    process = _delete_process(home, command, *args, stdin=subprocess.DEVNULL)
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    assert stderr == ""
    assert stdout.strip().endswith("nothing deleted")
    assert store().get_session(session_id) is not None


def test_ctrl_c_at_the_question_still_interrupts(
    home: Path, session_id: str, store: Callable[[], SQLiteSessionStore]
) -> None:
    process = _delete_process(home, "delete", session_id, stdin=subprocess.PIPE)
    assert process.stdout is not None
    asked = ""
    while not asked.endswith("[y/N]: "):
        char = process.stdout.read(1)
        assert char, "the question was never asked"
        asked += char
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 130
    assert stderr.splitlines() == ["error: interrupted"]
    assert store().get_session(session_id) is not None


def test_mode_filter_help_names_no_default(cli: Invoke) -> None:
    result = cli("sessions", "list", "--help")

    assert result.exit_code == 0
    options = result.stdout.split("Options", 1)[1]
    mode_help = options.split("--mode", 1)[1].split("--status", 1)[0]
    assert "dual_agent" in mode_help and "chat_agent_tools" in mode_help
    assert "default" not in mode_help


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_a_store_this_user_may_not_write_is_still_listed_shown_exported_and_replayed(
    home: Path, session_id: str
) -> None:
    database = home / "agent-lab.sqlite3"
    before, entries = _md5(database), sorted(p.name for p in home.iterdir())

    def agent_lab(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agent_lab", *args]
        env = process_env(home)
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    with unwritable(database), unwritable(home):
        listed = agent_lab("sessions", "list", "--json")
        shown = agent_lab("sessions", "show", session_id)
        exported = agent_lab("sessions", "export", session_id)
        replayed = agent_lab("replay", session_id, "--speed", "0", "--quiet")
        deleted = agent_lab("sessions", "delete", session_id, "--yes")

    for done in (listed, shown, exported, replayed):
        assert done.returncode == 0, done.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == [session_id]
    assert "Schedule a review" in shown.stdout
    assert json.loads(exported.stdout)["session"]["session_id"] == session_id
    assert deleted.returncode != 0 and "read-only" in deleted.stderr, deleted.stderr
    assert _md5(database) == before
    assert sorted(p.name for p in home.iterdir()) == entries


def test_export_otlp_with_out_says_the_two_do_not_go_together(cli: Invoke) -> None:
    result = cli("sessions", "export", "any", "--format", "otlp", "--out", "spans.json")

    assert result.exit_code == 2
    assert result.error_lines == [
        "error: --out does not go with --format otlp: the spans go to the trace backend"
    ]


def test_list_marks_a_session_a_live_runtime_of_another_process_drives(
    cli: Invoke, home: Path
) -> None:
    with SSETranscriptServer(*holder_answers()) as model:
        with Holder(home / "agent-lab.sqlite3", model.base_url, "driven") as holder:
            table = cli("sessions", "list")
            as_json = cli("sessions", "list", "--json")
            holder.release()
        after = cli("sessions", "list", "--json")

    assert table.exit_code == 0 and as_json.exit_code == 0, table.stderr + as_json.stderr
    header, row = (line for line in table.stdout.splitlines() if "live" in line or "driven" in line)
    assert header.split()[-1] == "live" and row.split()[-1] == "live"
    [listed] = json.loads(as_json.stdout)
    assert listed["id"] == "driven" and f"pid {holder.pid} on " in listed["held_by"]
    assert [session["held_by"] for session in json.loads(after.stdout)] == [None]
