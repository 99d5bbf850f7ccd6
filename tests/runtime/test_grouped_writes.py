"""A session on the SQLite store commits each durable write with the audits buffered
before it, in one transaction; when that write fails, its audits are still kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text
from tests.runtime.runtime_helpers import read_until
from tests.store.test_atomic_writes import commit_frames


def _request() -> DebugRunRequest:
    return DebugRunRequest(
        session_id="grouped",
        user_message="",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=[]),
        tool_invocation_mode="dual_agent",
    )


class ForwardingStore:
    """Forwards every call on its own, as instrumentation wrappers do: one
    transaction per store call."""

    def __init__(self, inner: SQLiteSessionStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _turn_commits(path: Path, wrap: bool) -> tuple[int, list[str]]:
    inner = SQLiteSessionStore(path)
    store: Any = ForwardingStore(inner) if wrap else inner
    runtime = DebugRuntime(ScriptedChatClient([text("Hello!")]), session_store=store)
    queues = runtime.start_session(_request())
    await read_until(queues, {"session_started"})
    before = commit_frames(path)
    await queues.input.put("Hi there.")
    await read_until(queues, {"turn_completed"})
    commits = commit_frames(path) - before
    await runtime.aclose()
    events = [audit["event"] for audit in inner.list_audit_logs("grouped")]
    inner.close()
    return commits, events


@pytest.mark.asyncio
async def test_each_write_of_a_turn_is_one_transaction_with_its_audits(tmp_path: Path) -> None:
    grouped, grouped_events = await _turn_commits(tmp_path / "grouped.sqlite3", wrap=False)
    # The turn's writes: its start (with the user message), the answer, its end.
    assert grouped == 3
    forwarded, forwarded_events = await _turn_commits(tmp_path / "forwarded.sqlite3", wrap=True)
    # Call by call, the audits before each of the three go in a transaction of their
    # own, and the turn's end (metrics, then the turn row) takes two.
    assert forwarded == 7
    assert grouped_events == forwarded_events
    assert "turn_completed" in grouped_events


@pytest.mark.asyncio
async def test_a_failed_write_still_keeps_the_audits_that_went_with_it(tmp_path: Path) -> None:
    path = tmp_path / "failing.sqlite3"
    store = SQLiteSessionStore(path)
    runtime = DebugRuntime(ScriptedChatClient([text("never sent")]), session_store=store)
    queues = runtime.start_session(_request())
    await read_until(queues, {"session_started"})
    # A real SQLite failure of the turn's first write, from another connection.
    side = sqlite3.connect(path, isolation_level=None)
    side.execute(
        "CREATE TRIGGER refuse_turns BEFORE INSERT ON turns"
        " BEGIN SELECT RAISE(ABORT, 'turns refused by the test'); END"
    )
    side.close()
    await queues.input.put("Hi there.")
    outputs = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    error = outputs[-1]
    assert error["type"] == "error", error
    assert error["failure_reason"].startswith("session_persistence_failed:")
    events = [audit["event"] for audit in store.list_audit_logs("grouped")]
    assert events[:2] == ["session_started", "turn_started"]
    assert store.list_turns("grouped") == []
    assert store.list_messages("grouped") == []
    store.close()
