"""``agent-lab replay``: recorded chunks through the current code, compared per turn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli import replay as replay_module
from agent_lab.interfaces.cli.replay import (
    RecordedCall,
    TurnRecord,
    compare_turns,
    load_recording,
    normalize,
    pacing,
)
from tests.cli.cli_helpers import Invoke, copy_database, invoke_in, sessions_by_mode


@pytest.fixture(scope="module")
def recorded_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One demo run per module: its home and its session ids by mode."""
    source = tmp_path_factory.mktemp("demo-home")
    assert invoke_in(source, "demo", "--fast").exit_code == 0
    with SQLiteSessionStore(source / "agent-lab.sqlite3") as opened:
        ids = {mode: session["id"] for mode, session in sessions_by_mode(opened).items()}
    return source, ids


@pytest.fixture
def demo_sessions(recorded_demo: tuple[Path, dict[str, str]], home: Path) -> dict[str, str]:
    """The demo's sessions, copied into this test's own database."""
    source, ids = recorded_demo
    copy_database(source, home)
    return ids


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_replay_reproduces_a_recorded_session(
    cli: Invoke, demo_sessions: dict[str, str], mode: str
) -> None:
    result = cli("replay", demo_sessions[mode], "--speed", "0")

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "identical: 4 turn(s)" in result.stdout
    assert "you› Please turn the volume down to 20." in result.stdout


def test_replay_leaves_the_recorded_session_untouched(
    cli: Invoke, demo_sessions: dict[str, str], store: Callable[[], SQLiteSessionStore]
) -> None:
    session_id = demo_sessions["dual_agent"]
    before = store().list_audit_logs(session_id)

    assert cli("replay", session_id, "--speed", "0", "--quiet").exit_code == 0

    assert store().list_audit_logs(session_id) == before
    assert len(store().list_sessions()) == 2


def test_replay_reports_altered_chunks_as_a_difference(
    cli: Invoke, demo_sessions: dict[str, str], home: Path
) -> None:
    session_id = demo_sessions["dual_agent"]
    _alter_chunks(home / "agent-lab.sqlite3", session_id, "Setting", "Putting")

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 1
    assert "difference(s)" in result.stdout
    assert "turn 1: visible text differs" in result.stdout
    assert "Putting" in result.stdout


def test_replay_reports_a_removed_tool_call(
    cli: Invoke, demo_sessions: dict[str, str], home: Path
) -> None:
    session_id = demo_sessions["dual_agent"]
    _drop_event_blocks(home / "agent-lab.sqlite3", session_id, turn=4)

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 1
    assert "turn 4: status terminated → completed" in result.stdout
    assert "turn 4: events" in result.stdout
    assert "was not made" not in result.stdout  # no argument call was recorded for it


def test_replay_keeps_the_recorded_timing_scaled_by_speed(
    cli: Invoke,
    store: Callable[[], SQLiteSessionStore],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "slow.toml"
    config.write_text("simulated_ttft_ms = 400\nsimulated_tokens_per_second = 0\n")
    assert cli("run", "hi there", "--config", str(config), AGENT_LAB_SIM_FAST=None).exit_code == 0
    [session] = store().list_sessions()
    recording = load_recording(store(), session["id"])
    schedule = [d for call in recording.chat_calls for d in pacing(call, 1.0) if d > 0]
    assert schedule and schedule[0] >= 0.35  # the recorded wait for the first chunk

    slept = _record_replay_sleeps(monkeypatch)
    assert cli("replay", session["id"], "--quiet").exit_code == 0
    at_recorded_speed = list(slept)
    slept.clear()
    assert cli("replay", session["id"], "--quiet", "--speed", "8").exit_code == 0

    assert at_recorded_speed == pytest.approx(schedule)
    assert slept == pytest.approx([delay / 8 for delay in schedule])


class _RecordedSleeps:
    """Stands in for ``asyncio`` in the replay module, noting each wait it asks for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(delay)


def _record_replay_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded = _RecordedSleeps()
    monkeypatch.setattr(replay_module, "asyncio", recorded)
    return recorded.delays


def test_replay_follows_the_mode_each_turn_ran_in(cli: Invoke) -> None:
    first = cli("run", "Set the volume to 30", "--json", "--mode", "dual_agent")
    assert first.exit_code == 0, first.stderr
    session_id = str(json.loads(first.stdout.splitlines()[0])["session_id"])
    for text, mode in (
        ("Schedule a review tomorrow at 2pm Europe/Berlin", "chat_agent_tools"),
        ("Now search for BM25", "dual_agent"),
    ):
        assert cli("run", text, "--session", session_id, "--mode", mode).exit_code == 0
    exported = json.loads(cli("sessions", "export", session_id).stdout)
    assert [record["mode"] for record in exported["records"]] == [
        "dual_agent",
        "chat_agent_tools",
        "dual_agent",
    ]

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "identical: 3 turn(s)" in result.stdout
    assert "difference" not in result.stdout


def test_replay_continues_a_terminated_session_the_recording_continued(
    cli: Invoke, demo_sessions: dict[str, str]
) -> None:
    session_id = demo_sessions["dual_agent"]  # its turn 4 ends the session
    assert cli("run", "Hello again", "--session", session_id).exit_code == 0

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "identical: 5 turn(s)" in result.stdout


def test_replay_of_an_unknown_session_is_one_usage_line(cli: Invoke) -> None:
    result = cli("replay", "missing")

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "unknown session id" in result.stderr


def test_replay_in_a_real_process(cli_process: Invoke, demo_sessions: dict[str, str]) -> None:
    result = cli_process("replay", demo_sessions["chat_agent_tools"], "--speed", "0", "-q")

    assert result.exit_code == 0, result.stdout + result.stderr


def test_normalize_masks_ids_and_timestamps_but_not_content() -> None:
    content = json.dumps(
        {"entry_id": "cal_1234567890ab", "created_at": "2026", "title": "Sync", "start_at": "x"}
    )

    assert normalize(content) == {
        "entry_id": "<volatile>",
        "created_at": "<volatile>",
        "title": "Sync",
        "start_at": "x",
    }
    assert normalize("see evt_0123456789abcdef") == "see <id>"
    assert normalize({"previous": 5}, frozenset({"previous"})) == {"previous": "<volatile>"}


def test_compare_turns_lists_each_kind_of_difference() -> None:
    recorded = [TurnRecord(1, "completed", 1, "Hello", [[1, "a", {}]], [[1, "a", "ok", 1]])]
    replayed = [
        TurnRecord(1, "completed", 2, "Help", [[1, "b", {}]], [[1, "a", "ok", 2]]),
        TurnRecord(2, "completed", 1, "", [], []),
    ]

    found = compare_turns(recorded, replayed)

    assert any("round count 1 → 2" in line for line in found)
    assert any("visible text differs" in line for line in found)
    assert any("events" in line for line in found)
    assert any("tool result" in line for line in found)
    assert "turn 2: replayed, but not in the recording" in found
    assert compare_turns(recorded, recorded) == []


def test_pacing_spreads_the_recorded_latency() -> None:
    call = RecordedCall("chat", 1, 1, [{}, {}, {}], ttft_ms=300, latency_ms=500)

    assert pacing(call, 1.0) == pytest.approx([0.3, 0.1, 0.1])
    assert pacing(call, 2.0) == pytest.approx([0.15, 0.05, 0.05])
    assert pacing(call, 0) == [0.0, 0.0, 0.0]


def _alter_chunks(database: Path, session_id: str, old: str, new: str) -> None:
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT id, details FROM audit_logs WHERE session_id = ? AND event = ?",
            (session_id, "chat_agent_response"),
        ).fetchall()
        for row_id, details in rows:
            data = json.loads(details)
            altered = json.dumps(data["raw_chunks"]).replace(old, new)
            data["raw_chunks"] = json.loads(altered)
            connection.execute(
                "UPDATE audit_logs SET details = ? WHERE id = ?", (json.dumps(data), row_id)
            )


def _drop_event_blocks(database: Path, session_id: str, *, turn: int) -> None:
    """Blank the text of a turn's chunks from the first event-block marker on."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT id, details FROM audit_logs"
            " WHERE session_id = ? AND event = ? AND turn_index = ?",
            (session_id, "chat_agent_response", turn),
        ).fetchall()
        for row_id, details in rows:
            data = json.loads(details)
            dropping = False
            for chunk in data["raw_chunks"]:
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    dropping = dropping or "<" in (delta.get("content") or "")
                    if dropping and "content" in delta:
                        delta["content"] = ""
            connection.execute(
                "UPDATE audit_logs SET details = ? WHERE id = ?", (json.dumps(data), row_id)
            )


def test_replay_of_a_run_on_changed_tool_state_hints_at_ignore_key(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    assert cli("run", "Please set the volume to 35").exit_code == 0
    second = cli("run", "Please set the volume to 20", "--json")  # starts from 35, not fresh
    session_id = str(json.loads(second.stdout.splitlines()[0])["session_id"])

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 1
    hint = next(line for line in result.stdout.splitlines() if line.startswith("hint:"))
    assert "fresh state" in hint and "(previous)" in hint
    command = hint.split("ignore them: ")[1]
    assert command == f"agent-lab replay {session_id} --ignore-key previous"
    followed = cli(*command.split()[1:], "--speed", "0", "--quiet")  # the hint, as written
    assert followed.exit_code == 0, followed.stdout
    assert "identical" in followed.stdout


def _failing_session(cli: Invoke, *, first_ok: bool) -> str:
    """A session whose last turn failed at the provider (HTTP 500), optionally after an
    ordinary first turn on the simulated model."""
    from agent_lab.testing import ScriptedResponse, SSETranscriptServer

    session: list[str] = []
    if first_ok:
        first = cli("run", "Hello there", "--json", "--mode", "chat_agent_tools")
        session = ["--session", str(json.loads(first.stdout.splitlines()[0])["session_id"])]
    broken = ScriptedResponse.error(500, {"error": {"message": "the model fell over"}})
    with SSETranscriptServer(fallback=broken) as server:
        endpoint = ["--base-url", server.base_url, "--model", "m"]
        failed = cli("run", "Tell me more", "--json", *session, *endpoint)
    assert failed.exit_code == 1, failed.stderr
    return str(json.loads(failed.stdout.splitlines()[0])["session_id"])


def test_replay_of_a_session_whose_last_turn_failed_replays_the_turns_before(
    cli: Invoke,
) -> None:
    session_id = _failing_session(cli, first_ok=True)

    result = cli("replay", session_id, "--speed", "0", "--quiet")

    assert result.exit_code == 0, result.stdout
    assert "HTTP 500" not in result.stdout and "no such model call" not in result.stdout
    assert "note: turn 2 was failed in the recording" in result.stdout
    assert "turn 1 is replayed and compared, turn 2 is not" in result.stdout
    assert "identical: 1 turn(s)" in result.stdout


def test_replay_of_a_session_that_failed_at_once_explains_there_is_nothing_to_replay(
    cli: Invoke,
) -> None:
    session_id = _failing_session(cli, first_ok=False)

    result = cli("replay", session_id, "--speed", "0")

    assert result.exit_code == 2
    [line] = result.error_lines
    assert "cannot be replayed: turn 1 was failed in the recording" in line
    assert "only completed turns can be" in line
