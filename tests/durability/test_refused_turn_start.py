"""A turn whose start the store refused (the file locked, or not writable for a moment)
is on record once a write works again: its row keeps the text the user sent and ends
as the user saw it end, so the turn rows, the records and ``sessions show`` agree on
its number, and nothing of it joins the transcript the model reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.export import export_session
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import FunctionChatClient, RecordedCall, text
from tests.cli.cli_helpers import invoke_in
from tests.durability.storage_faults import FaultInjectingStore


def _reply(call: RecordedCall) -> list[Any]:
    return text("Noted.")


async def _turn(queues: Any) -> dict[str, Any]:
    while True:
        output = await asyncio.wait_for(queues.output.get(), timeout=30)
        if output["type"] in ("turn_completed", "error"):
            return dict(output)


async def _three_turns(store: FaultInjectingStore) -> list[dict[str, Any]]:
    runtime = DebugRuntime(FunctionChatClient(_reply), session_store=store)
    request = DebugRunRequest(
        session_id="refused", user_message="first turn", chat_agent=AgentParams(model="m")
    )
    queues = runtime.start_session(request)
    ends = [await _turn(queues)]
    for line in ("second turn: schedule a review", "third turn"):
        await queues.input.put(line)
        ends.append(await _turn(queues))
    await runtime.aclose()
    return ends


@pytest.mark.parametrize("fault", ["locked", "read_only"])
def test_a_refused_turn_start_is_recorded_with_the_users_text(tmp_path: Path, fault: str) -> None:
    path = tmp_path / "lab.sqlite3"
    SQLiteSessionStore(path).close()
    store = FaultInjectingStore(path, "turn_start_and_user_message", fault, occurrence=2)
    try:
        ends = asyncio.run(_three_turns(store))
    finally:
        store.inner.close()

    assert [end["type"] for end in ends] == ["turn_completed", "error", "turn_completed"]
    reason = f"session_persistence_failed:{fault}"
    assert ends[1]["failure_reason"] == reason
    with SQLiteSessionStore(path, read_only=True) as check:
        export = export_session(check, "refused")
    assert [t.turn_index for t in export.turns] == [1, 2, 3]
    assert [r.turn_index for r in export.records] == [1, 2, 3]
    turn, record = export.turns[1], export.records[1]
    assert (turn.status, turn.failure_reason) == ("failed", reason)
    assert turn.user_message == record.user_message == "second turn: schedule a review"
    assert record.status == "failed" and record.failure is not None
    assert record.failure.reason == reason
    assert record.failure.message == ends[1]["message"]  # the error the user saw
    # it never ran: the model never read it, and the transcript does not hold it
    assert [m.content for m in export.messages if m.role == "user"] == ["first turn", "third turn"]

    shown = invoke_in(tmp_path, "sessions", "show", "--db", str(path), "refused")
    assert shown.exit_code == 0, shown.stderr
    assert "you› second turn: schedule a review" in shown.stdout
