"""A held lock at every grouped write of a turn, in both modes (DESIGN.md §9.1–5).

The SQLite store commits each durable write with the audits before it in one
transaction (``atomic_writes``); ``test_storage_faults.py`` injects its faults call by
call, through a wrapper the runtime does not group. Here the store is the real one
and the fault is real: a second connection holds ``BEGIN EXCLUSIVE`` while the Nth
group of the session starts, so that write (and its audits) fails as ``locked``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.application._transcript import message_from_record
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.durability.test_storage_faults import _model, _registry, _request, _until

GROUPS_IN_FIRST_TURN = 9
"""Session open, turn start, batch, two dispatches, two results, commit, then the end
with the answer (one group: a refused end keeps the answer for the next turn's start)."""


class LockedGroupStore(SQLiteSessionStore):
    """The real store; its ``fail_at``-th group starts while another connection holds
    the write lock."""

    def __init__(self, path: Path, fail_at: int) -> None:
        super().__init__(path, busy_timeout_ms=150)
        self.fail_at = fail_at
        self.groups = 0
        self.failed_group: int | None = None

    @contextlib.contextmanager
    def atomic_writes(self) -> Iterator[None]:
        self.groups += 1
        if self.groups != self.fail_at:
            with super().atomic_writes():
                yield
            return
        holder = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            self.failed_group = self.groups
            with super().atomic_writes():
                yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
@pytest.mark.parametrize("fail_at", range(1, GROUPS_IN_FIRST_TURN + 1))
async def test_a_locked_group_fails_its_write_and_the_next_turn_recovers(
    tmp_path: Path, fail_at: int, mode: str
) -> None:
    path = tmp_path / "lab.sqlite3"
    SQLiteSessionStore(path).close()
    store = LockedGroupStore(path, fail_at)
    ran: list[str] = []
    runtime = DebugRuntime(_model(mode), registry=_registry(ran), session_store=store)
    queues = runtime.start_session(_request(mode))
    first = await _until(queues, {"turn_completed", "error"})

    assert store.failed_group == fail_at, "the session made fewer grouped writes"
    error = first[-1]
    assert error["type"] == "error", error
    assert error["failure_reason"] == "session_persistence_failed:locked"
    assert "busy" in error["message"].lower()
    if fail_at == 1:  # the session never opened
        await runtime.aclose()
        assert ran == []
        store.close()
        return

    await queues.input.put("second turn")
    second = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert second[-1]["type"] == "turn_completed", second[-1]

    shown = {m["message"]["tool_call_id"] for m in first if m["type"] == "tool_result"}
    calls = {
        call["event"]["id"]: call
        for batch in store.list_batches("faulty")
        for call in batch["calls"]
    }
    for call_id in ran:  # a handler ran only once its dispatch was durable
        assert calls[call_id]["dispatched_at"] is not None, calls[call_id]
        assert calls[call_id]["state"] != "cancelled", calls[call_id]
    for call_id in shown & set(calls):  # a result was shown only once it was durable
        assert calls[call_id]["result"] is not None, calls[call_id]
    for call in calls.values():
        assert call["state"] != "pending", call
    records = store.list_messages("faulty")
    validate_tool_transcript([message_from_record(r) for r in records])
    assert records[-1]["content"].startswith("done")
    store.close()
