"""A session on the SQLite store commits each durable write with the audits buffered
before it, in one transaction; when that write fails, its audits are still kept."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
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
    # The turn's writes: its start (with the user message), then its end with the
    # answer (the turn ends right after it: one transaction for both, not two).
    assert grouped == 2
    forwarded, forwarded_events = await _turn_commits(tmp_path / "forwarded.sqlite3", wrap=True)
    # Call by call (no ``atomic_writes``: the answer is written as it comes), the
    # audits before each of the three writes go in a transaction of their own, and
    # the turn's end (metrics, then the turn row) takes two.
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


class LockedThirdGroup(SQLiteSessionStore):
    """The real store; its third group (a first turn's end) starts while another
    connection holds the write lock, so that write fails as ``locked``."""

    groups = 0

    @contextlib.contextmanager
    def atomic_writes(self) -> Iterator[None]:
        self.groups += 1
        holder = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if self.groups == 3:
            holder.execute("BEGIN EXCLUSIVE")
        try:
            with super().atomic_writes():
                yield
        finally:
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()


@pytest.mark.asyncio
async def test_an_answer_whose_turn_end_was_refused_is_kept_before_the_next_turn(
    tmp_path: Path,
) -> None:
    path = tmp_path / "refused_end.sqlite3"
    SQLiteSessionStore(path).close()
    store = LockedThirdGroup(path, busy_timeout_ms=100)
    client = ScriptedChatClient([text("First answer."), text("Second answer.")])
    runtime = DebugRuntime(client, session_store=store)
    queues = runtime.start_session(_request())
    await read_until(queues, {"session_started"})
    await queues.input.put("First question.")
    first = await read_until(queues, {"turn_completed", "error"})
    assert first[-1]["failure_reason"] == "session_persistence_failed:locked", first[-1]
    await queues.input.put("Second question.")
    second = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    assert second[-1]["type"] == "turn_completed", second[-1]
    assert store.groups > 3
    contents = [(m["turn_index"], m["role"], m["content"]) for m in store.list_messages("grouped")]
    assert contents == [
        (1, "user", "First question."),
        (1, "assistant", "First answer."),
        (2, "user", "Second question."),
        (2, "assistant", "Second answer."),
    ]
    turns = {t["turn_index"]: t for t in store.list_turns("grouped")}
    assert turns[1]["status"] == "failed"
    assert turns[1]["failure_reason"] == "session_persistence_failed:locked"
    assert turns[2]["status"] == "completed"
    store.close()


class SlowClose(SQLiteSessionStore):
    """The real store; the first turn's close waits, in the worker thread writing it,
    until the test lets it go."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = threading.Event()
        self.release = threading.Event()

    def complete_turn(self, session_id: str, turn_index: int, **fields: Any) -> None:
        if turn_index == 1 and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(10), "the test never let the close go"
        super().complete_turn(session_id, turn_index, **fields)


@pytest.mark.asyncio
async def test_a_close_written_with_its_answer_is_written_once_when_the_session_is_cancelled(
    tmp_path: Path,
) -> None:
    # Large enough that the close (with the answer) is written in a worker thread.
    answer = "A long answer. " * 5000
    store = SlowClose(tmp_path / "cancelled_close.sqlite3")
    runtime = DebugRuntime(ScriptedChatClient([text(answer)]), session_store=store)
    queues = runtime.start_session(_request())
    await read_until(queues, {"session_started"})
    await queues.input.put("A question.")
    assert await asyncio.to_thread(store.entered.wait, 10), "the close was never written"
    # The runtime gives up on an orderly end and cancels the session outright while
    # the close is being written; the write then lands.
    letting_go = threading.Timer(0.3, store.release.set)
    letting_go.start()
    await runtime.aclose(grace_seconds=0.05)
    letting_go.join()

    contents = [(m["turn_index"], m["role"], m["content"]) for m in store.list_messages("grouped")]
    assert contents == [(1, "user", "A question."), (1, "assistant", answer)]
    (turn,) = store.list_turns("grouped")
    assert turn["status"] == "completed"
    store.close()
