"""Calls of a cut-off batch in the turn record: the turn that gives them back to the
model lists them as ``recovered_calls`` (unknown where dispatched, not executed where
not), the same live and reopened, after a cancelled turn and after a killed process;
until then the store's ledger holds them as unreported."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lab.application.record import RecoveredCallRecord, unreported_calls
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.record.effect_lab import (
    batch_answer,
    cancel_mid_batch,
    crash_mid_batch,
    effect_registry,
    session_request,
)
from tests.record.record_support import answer, assert_same_records, reopened, run_once

MODES = ["dual_agent", "chat_agent_tools"]
UNKNOWN = "outcome unknown — check before repeating"


def _outcomes(calls: list[RecoveredCallRecord]) -> list[tuple[str, str, str | None]]:
    return [(c.event_name, c.status, c.note) for c in calls]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_the_turn_after_a_cancelled_batch_records_its_calls_as_recovered(
    sse_server: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(batch_answer(mode), answer("The door may be locked; shall I check?"))

    live, session_id = await cancel_mid_batch(sse_server.base_url, database, mode)

    first, second = live.records()
    assert_same_records([first, second], reopened(database, session_id))
    assert first.status == "cancelled" and first.recovered_calls == []
    assert _outcomes(second.recovered_calls) == [
        ("door.lock", "unknown", UNKNOWN),
        ("lights.on", "not_executed", "not executed — the interruption came before it started"),
    ]
    door = second.recovered_calls[0]
    assert (door.turn_index, door.round_index) == (1, 1)
    assert door.event_id == first.tool_executions[0].event_id
    assert door.seq == 1 and second.entries[0].event == "turn_started"
    assert door.idempotency_key and door.idempotency_key.endswith(door.event_id)
    assert second.user_message == "Did it work?"  # not the recovery note after it
    with SQLiteSessionStore(database) as store:
        assert unreported_calls(store.list_unreported_batches(session_id)) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_restore_after_a_killed_process_records_the_calls_in_its_first_turn(
    sse_server: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(batch_answer(mode), answer("The door may be locked; shall I check?"))
    crash_mid_batch(database, sse_server.base_url, mode, "crashed")

    request = session_request(mode, "crashed", "Did it work?")
    registry = effect_registry(_never_called)
    _, live, _ = await run_once(sse_server.base_url, database, request, registry)

    [record] = live.records()
    assert record.turn_index == 2 and record.user_message == "Did it work?"
    assert _outcomes(record.recovered_calls) == [
        ("door.lock", "succeeded", None),  # it ran and its result was recorded
        ("lights.on", "unknown", UNKNOWN),  # it was running when the process died
    ]
    assert all(c.seq is None for c in record.recovered_calls)  # from session_started
    first, second = reopened(database, "crashed")
    assert_same_records([record], [second])
    assert first.failure is not None and first.failure.reason == "interrupted"


@pytest.mark.asyncio
async def test_a_cancelled_batch_is_unreported_in_the_store_until_the_next_turn(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(batch_answer("dual_agent"))
    assert unreported_calls([]) == []
    live, session_id = await cancel_mid_batch(sse_server.base_url, database, "dual_agent", None)

    with SQLiteSessionStore(database) as store:
        pending = unreported_calls(store.list_unreported_batches(session_id))
    assert [(c.event_name, c.status) for c in pending] == [
        ("door.lock", "unknown"),
        ("lights.on", "not_executed"),
    ]
    assert pending[0].event_id == live.records()[0].tool_executions[0].event_id


async def _never_called() -> None:
    raise AssertionError("a tool ran after the restore")


@pytest.mark.asyncio
async def test_live_records_can_forget_the_turns_before_one(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(batch_answer("dual_agent"), answer("The door may be locked."))
    live, _ = await cancel_mid_batch(sse_server.base_url, tmp_path / "s.sqlite3", "dual_agent")
    second = live.record(2)

    live.forget_before(2)

    assert [r.turn_index for r in live.records()] == [2]
    assert live.record(2) == second
