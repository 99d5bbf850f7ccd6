"""``async with runtime.session(request)``: send, iterate, cancel, close, and clean exit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.events import ResultPolicy
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime, RuntimeSession
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.errors import UsageError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, tool_call


def _request(message: str = "hello", *, tools: list[str] | None = None) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="handle",
        user_message=message,
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=tools or [], max_event_loops=2),
        tool_invocation_mode="chat_agent_tools",
    )


async def _until(session: RuntimeSession, kind: str) -> list[OutputMessage]:
    """Iterate until a message of ``kind`` (inclusive)."""
    seen: list[OutputMessage] = []
    async for message in session:
        seen.append(message)
        if message["type"] == kind:
            break
    return seen


def _types(messages: list[OutputMessage]) -> list[str]:
    return [m["type"] for m in messages if m["type"] != "audit"]


def _other_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


async def _can_claim(store: SQLiteSessionStore, message: str) -> list[OutputMessage]:
    """Run one turn of the same session on a second runtime (no claim wait)."""
    second = DebugRuntime(ScriptedChatClient([text("second runtime")]), session_store=store)
    async with second.session(_request(message)) as session:
        return await _until(session, "turn_completed")


def _blocking_registry(release: asyncio.Event, started: asyncio.Event) -> ToolRegistry:
    async def wait(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"waited": True}

    def end(event: ToolCallEvent) -> dict[str, Any]:
        return {"ended": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name="wait", description="Waits.", parameters={"type": "object"}, handler=wait
            ),
            ToolDefinition(
                name="end",
                description="Ends the call.",
                parameters={"type": "object"},
                handler=end,
                result_policy=ResultPolicy.TERMINATE,
                farewell="Bye.",
            ),
        ]
    )


@pytest.mark.asyncio
async def test_the_handle_streams_a_turn(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(ScriptedChatClient([text("hi ", "there")]), session_store=store)
    async with runtime.session(_request()) as session:
        turn = await _until(session, "turn_completed")
        assert session.session_id == "handle"
    assert _types(turn) == [
        "session_started",
        "turn_started",
        "message_delta",
        "message_delta",
        "round_stats",
        "turn_completed",
    ]
    deltas = [m["content"] for m in turn if m["type"] == "message_delta"]
    assert deltas == ["hi ", "there"]
    assert [m["content"] for m in store.list_messages("handle")] == ["hello", "hi there"]


@pytest.mark.asyncio
async def test_send_runs_several_turns_in_order(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one"), text("two"), text("three")])
    runtime = DebugRuntime(client, session_store=store)
    async with runtime.session(_request("first")) as session:
        await _until(session, "turn_completed")
        await session.send("second")
        await session.send("third")  # queued behind the second turn
        second = await _until(session, "turn_completed")
        third = await _until(session, "turn_completed")
    assert [m for m in second if m["type"] == "turn_completed"] == [
        {"type": "turn_completed", "turn_index": 2, "round_count": 1}
    ]
    assert third[-1] == {"type": "turn_completed", "turn_index": 3, "round_count": 1}
    contents = [m["content"] for m in store.list_messages("handle")]
    assert contents == ["first", "one", "second", "two", "third", "three"]


@pytest.mark.asyncio
async def test_iteration_ends_when_a_tool_terminates_the_session(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    registry = _blocking_registry(asyncio.Event(), asyncio.Event())
    client = ScriptedChatClient([[tool_call("e1", "end")]])
    runtime = DebugRuntime(client, registry=registry, session_store=store)
    async with runtime.session(_request("hang up", tools=["end"])) as session:
        everything = [message async for message in session]  # no break: it must end
        assert not session.running
        with pytest.raises(UsageError):
            await session.send("anyone there?")
    assert _types(everything)[-2:] == ["turn_completed", "done"]
    finished = [m for m in everything if m["type"] == "audit" and m["event"] == "turn_completed"]
    assert finished[0]["details"].get("status") == "terminated"


@pytest.mark.asyncio
async def test_iteration_ends_after_close_with_the_turns_already_sent(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one"), text("two")])
    runtime = DebugRuntime(client, session_store=store)
    async with runtime.session(_request("first")) as session:
        await session.send("second")
        await session.close()
        with pytest.raises(UsageError):
            await session.send("too late")
        rest = [message async for message in session]
        assert not session.running  # the iteration ends once the runtime has stopped
    assert _types(rest).count("turn_completed") == 2
    assert _types(rest)[-1] == "done"
    assert [m["content"] for m in store.list_messages("handle")][-1] == "two"


@pytest.mark.asyncio
async def test_iteration_ends_after_the_error_of_a_session_that_cannot_open(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    holder = DebugRuntime(ScriptedChatClient([text("held")]), session_store=store)
    async with holder.session(_request()) as held:
        await _until(held, "turn_completed")
        refused = DebugRuntime(ScriptedChatClient([]), session_store=store)
        async with refused.session(_request("intruder")) as session:
            outputs = [message async for message in session]
    assert outputs[-1]["type"] == "error"
    assert outputs[-1].get("failure_reason") == "session_busy"


@pytest.mark.asyncio
async def test_a_plain_exit_after_close_lets_the_turns_already_sent_finish(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one"), text("two")])
    runtime = DebugRuntime(client, session_store=store)
    async with runtime.session(_request("first")) as session:
        await session.send("second")
        await session.close()  # and leave without reading anything
    assert not runtime.running
    assert [m["content"] for m in store.list_messages("handle")][-2:] == ["second", "two"]
    statuses = [turn["status"] for turn in store.usage_summary("handle")["turns"]]
    assert statuses == ["completed", "completed"]


@pytest.mark.asyncio
async def test_cancel_turn_cancels_only_the_running_turn(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    release, started = asyncio.Event(), asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")], text("still here")])
    runtime = DebugRuntime(
        client, registry=_blocking_registry(release, started), session_store=store
    )
    async with runtime.session(_request("wait for it", tools=["wait"])) as session:
        await started.wait()
        assert session.cancel_turn() is True
        cancelled = await _until(session, "error")
        await session.send("are you there?")
        after = await _until(session, "turn_completed")
    assert cancelled[-1].get("failure_reason") == "cancelled"
    assert after[-1] == {"type": "turn_completed", "turn_index": 2, "round_count": 1}
    assert [m["content"] for m in store.list_messages("handle")][-1] == "still here"


@pytest.mark.asyncio
async def test_the_claim_is_released_when_the_body_raises(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    release, started = asyncio.Event(), asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(
        client, registry=_blocking_registry(release, started), session_store=store
    )
    with pytest.raises(RuntimeError, match="the consumer broke"):
        async with runtime.session(_request("wait", tools=["wait"])):
            await started.wait()  # mid-turn, the claim held
            raise RuntimeError("the consumer broke")
    assert not runtime.running
    assert _other_tasks() == set()
    taken = await _can_claim(store, "after the crash")
    assert taken[-1]["type"] == "turn_completed"
    turns = store.usage_summary("handle")["turns"]
    assert [turn["status"] for turn in turns][:1] == ["cancelled"]


@pytest.mark.asyncio
async def test_the_claim_is_released_when_the_body_raises_before_the_session_opened(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(ScriptedChatClient([text("unused")]), session_store=store)
    with pytest.raises(KeyError):
        async with runtime.session(_request("too soon")):
            raise KeyError("at once")  # the runtime has not even claimed the session yet
    assert not runtime.running
    assert _other_tasks() == set()
    taken = await _can_claim(store, "right after")
    assert taken[-1]["type"] == "turn_completed"


@pytest.mark.asyncio
async def test_the_claim_is_released_when_the_body_is_cancelled(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    release, started = asyncio.Event(), asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(
        client, registry=_blocking_registry(release, started), session_store=store
    )

    async def consume() -> None:
        async with runtime.session(_request("wait", tools=["wait"])) as session:
            async for _ in session:
                pass

    consumer = asyncio.create_task(consume())
    await started.wait()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert not runtime.running
    assert _other_tasks() == set()
    taken = await _can_claim(store, "after the cancel")
    assert taken[-1]["type"] == "turn_completed"


@pytest.mark.asyncio
async def test_leaving_the_block_stops_turns_sent_but_not_yet_run(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("one")])  # a second model call would fail the test
    runtime = DebugRuntime(client, session_store=store)
    async with runtime.session(_request("first")) as session:
        await _until(session, "turn_completed")
        await session.send("never run")
    assert not runtime.running
    assert _other_tasks() == set()
    assert len(client.calls) == 1
    assert [m["content"] for m in store.list_messages("handle")] == ["first", "one"]


@pytest.mark.asyncio
async def test_no_task_is_left_after_a_normal_exit() -> None:
    runtime = DebugRuntime(ScriptedChatClient([text("hi")]))
    before = _other_tasks()
    async with runtime.session(_request()) as session:
        await _until(session, "turn_completed")
        assert runtime.running
    assert _other_tasks() == before
    assert not runtime.running


class _ClockBroke(Exception):
    pass


def _broken_clock() -> float:
    raise _ClockBroke("the clock broke")


@pytest.mark.asyncio
async def test_a_crashed_runtime_ends_the_iteration_with_an_internal_error() -> None:
    runtime = DebugRuntime(ScriptedChatClient([]), clock=_broken_clock)
    seen: list[OutputMessage] = []
    async with runtime.session(_request()) as session:
        async for message in session:
            seen.append(message)
        assert not session.running
    assert [message["type"] for message in seen] == ["error"]
    error = seen[0]
    assert error["type"] == "error"
    assert error.get("failure_reason") == "internal_error"
    assert "the clock broke" in error["message"]
    assert _other_tasks() == set()


@pytest.mark.asyncio
async def test_run_reports_a_crash_instead_of_waiting_forever() -> None:
    runtime = DebugRuntime(ScriptedChatClient([]), clock=_broken_clock)
    request = _request().model_copy(update={"session_id": None})
    messages = await asyncio.wait_for(_collect(runtime.run(request)), timeout=10)
    assert [message["type"] for message in messages] == ["error"]
    assert messages[0].get("failure_reason") == "internal_error"
    assert not runtime.running


async def _collect(stream: AsyncIterator[OutputMessage]) -> list[OutputMessage]:
    return [message async for message in stream]
