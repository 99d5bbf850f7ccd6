"""A session handle's ``send()`` and ``cancel_turn()`` right at a turn's edges."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.events import ResultPolicy
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.errors import UsageError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, tool_call
from tests.runtime.test_session_handle import _request, _types, _until


def _slow_goodbye(release: asyncio.Event, started: asyncio.Event) -> ToolRegistry:
    """``bye`` ends the session once ``release`` is set; ``touch`` counts its runs."""

    async def bye(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"ended": True}

    def touch(event: ToolCallEvent) -> dict[str, Any]:
        touched.append(event.id)
        return {"touched": True}

    touched: list[str] = []
    registry = ToolRegistry(
        [
            ToolDefinition(
                name="bye",
                description="Ends the call.",
                parameters={"type": "object"},
                handler=bye,
                result_policy=ResultPolicy.TERMINATE,
                farewell="Bye.",
            ),
            ToolDefinition(
                name="touch", description="Touches.", parameters={"type": "object"}, handler=touch
            ),
        ]
    )
    registry.touched = touched  # type: ignore[attr-defined]
    return registry


def _finished(messages: list[OutputMessage]) -> dict[str, Any]:
    audits = [m for m in messages if m["type"] == "audit" and m["event"] == "session_finished"]
    assert len(audits) == 1
    return dict(audits[0]["details"])


def _goodbye_runtime(
    tmp_path: Path, release: asyncio.Event, started: asyncio.Event
) -> tuple[SQLiteSessionStore, DebugRuntime]:
    """A stored runtime whose first turn calls a goodbye tool that waits for ``release``."""
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([[tool_call("b1", "bye")]])
    runtime = DebugRuntime(client, registry=_slow_goodbye(release, started), session_store=store)
    return store, runtime


@pytest.mark.asyncio
async def test_a_message_sent_while_a_terminating_turn_runs_is_reported_dropped(
    tmp_path: Path,
) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    store, runtime = _goodbye_runtime(tmp_path, release, started)
    async with runtime.session(_request("That's all, goodbye!", tools=["bye"])) as session:
        await started.wait()  # the terminating batch runs
        await session.send("Wait, one more thing.")
        release.set()
        everything = [message async for message in session]
        with pytest.raises(UsageError, match="the session is closed"):
            await session.send("after the end")
    assert _types(everything)[-2:] == ["turn_completed", "done"]
    assert _finished(everything)["dropped_messages"] == ["Wait, one more thing."]
    assert [turn["user_message"] for turn in store.list_turns("handle")] == ["That's all, goodbye!"]
    stored = [a for a in store.list_audit_logs("handle") if a["event"] == "session_finished"]
    assert [a["details"]["dropped_messages"] for a in stored] == [["Wait, one more thing."]]


@pytest.mark.asyncio
async def test_turns_dropped_by_leaving_the_block_are_reported_with_the_session_end(
    tmp_path: Path,
) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    store, runtime = _goodbye_runtime(tmp_path, release, started)
    async with runtime.session(_request("goodbye", tools=["bye"])) as session:
        await started.wait()
        await session.send("queued one")
        await session.send("queued two")
    stored = [a for a in store.list_audit_logs("handle") if a["event"] == "session_finished"]
    assert [a["details"].get("dropped_messages") for a in stored] == [["queued one", "queued two"]]
    assert [turn["user_message"] for turn in store.list_turns("handle")] == ["goodbye"]


@pytest.mark.asyncio
async def test_a_cancel_right_after_a_send_cancels_that_turn_as_it_starts(tmp_path: Path) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    registry = _slow_goodbye(release, started)
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one"), [tool_call("t1", "touch")], text("three")])
    runtime = DebugRuntime(client, registry=registry, session_store=store)
    async with runtime.session(_request("first", tools=["touch"])) as session:
        await _until(session, "turn_completed")
        await session.send("touch it")
        assert session.cancel_turn() is True  # applies to the turn just sent
        assert session.cancel_turn() is False  # nothing else sent and unstarted
        cancelled = await _until(session, "error")
        assert len(client.calls) == 1  # the cancelled turn never asked the model
        await session.send("third")
        after = await _until(session, "turn_completed")
    assert _types(cancelled) == ["turn_started", "error"]
    assert cancelled[-1].get("failure_reason") == "cancelled"
    assert after[-1] == {"type": "turn_completed", "turn_index": 3, "round_count": 2}
    assert registry.touched == ["t1"]  # type: ignore[attr-defined]  # by the third turn only
    assert [(t["user_message"], t["status"]) for t in store.list_turns("handle")] == [
        ("first", "completed"),
        ("touch it", "cancelled"),
        ("third", "completed"),
    ]
    assert [m["content"] for m in store.list_messages("handle") if m["role"] == "user"] == [
        "first",
        "touch it",
        "third",
    ]


@pytest.mark.asyncio
async def test_each_cancel_between_turns_marks_one_more_unstarted_turn(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one"), text("four")])
    runtime = DebugRuntime(client, session_store=store)
    async with runtime.session(_request("first")) as session:
        await _until(session, "turn_completed")
        await session.send("second")
        await session.send("third")
        assert [session.cancel_turn() for _ in range(3)] == [True, True, False]
        await session.send("fourth")
        await session.close()
        rest = [message async for message in session]
    errors = [m.get("failure_reason") for m in rest if m["type"] == "error"]
    assert errors == ["cancelled", "cancelled"]
    assert [(t["user_message"], t["status"]) for t in store.list_turns("handle")] == [
        ("first", "completed"),
        ("second", "cancelled"),
        ("third", "cancelled"),
        ("fourth", "completed"),
    ]
