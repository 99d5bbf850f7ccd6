"""``SessionDriver`` on the session handle: turn ends, terminate, close, claim release."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.events import ResultPolicy
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli.driver import SessionDriver, TurnHooks, drive_turns
from agent_lab.testing import ScriptedChatClient, text, tool_call


def _request(message: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="driven",
        user_message=message,
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["hang_up"]),
        tool_invocation_mode="chat_agent_tools",
    )


def _registry() -> ToolRegistry:
    def hang_up(event: ToolCallEvent) -> dict[str, Any]:
        return {"ended": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name="hang_up",
                description="Ends the call.",
                parameters={"type": "object"},
                handler=hang_up,
                result_policy=ResultPolicy.TERMINATE,
                farewell="Bye.",
            )
        ]
    )


def _other_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


@pytest.mark.asyncio
async def test_turns_end_and_a_terminating_tool_ends_the_session(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    client = ScriptedChatClient([text("hello"), [tool_call("h1", "hang_up")]])
    seen: list[OutputMessage] = []
    hooks = TurnHooks(observer=seen.append)
    runtime = DebugRuntime(client, registry=_registry(), session_store=store)
    driver = SessionDriver(runtime, hooks.observer)
    try:
        ends = await drive_turns(driver, _request("hi"), ["hi", "bye", "never sent"], hooks)
    finally:
        await driver.aclose()
    assert [(end.turn_index, end.status, end.session_over) for end in ends] == [
        (1, "completed", False),
        (2, "terminated", True),
    ]
    assert ends[0].round_count == 1 and ends[0].visible_ttft_ms is not None
    assert driver.session_id == "driven"
    assert seen[-1] == {"type": "done"}
    assert _other_tasks() == set()
    assert len(client.calls) == 2


@pytest.mark.asyncio
async def test_aclose_observes_the_end_and_releases_the_claim(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    seen: list[OutputMessage] = []
    runtime = DebugRuntime(ScriptedChatClient([text("one")]), session_store=store)
    driver = SessionDriver(runtime, seen.append)
    first = await driver.first_turn(_request("first"))
    await driver.aclose()
    assert first.status == "completed"
    assert [m["type"] for m in seen if m["type"] != "audit"][-1] == "done"
    assert not driver.runtime.running
    again = DebugRuntime(ScriptedChatClient([text("two")]), session_store=store)
    second = SessionDriver(again)
    try:
        end = await second.first_turn(_request("second"))
    finally:
        await second.aclose()
    assert (end.turn_index, end.status) == (2, "completed")


@pytest.mark.asyncio
async def test_aclose_cancels_a_turn_its_caller_gave_up_on(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    release, started = asyncio.Event(), asyncio.Event()

    async def wait(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="wait", description="Waits.", parameters={"type": "object"}, handler=wait
            )
        ]
    )
    request = _request("wait").model_copy(
        update={"event_agent": EventAgentParams(enabled_tools=["wait"])}
    )
    runtime = DebugRuntime(
        ScriptedChatClient([[tool_call("w1", "wait")]]), registry=registry, session_store=store
    )
    seen: list[OutputMessage] = []
    driver = SessionDriver(runtime, seen.append)
    turn = asyncio.create_task(driver.first_turn(request))
    await started.wait()
    turn.cancel()  # the caller stops waiting for the turn
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert driver.turn_running is False
    await driver.aclose()  # would wait for the tool forever if it did not cancel
    assert not runtime.running
    errors = [m for m in seen if m["type"] == "error"]
    assert [m.get("failure_reason") for m in errors] == ["cancelled"]
    assert [t["status"] for t in store.usage_summary("driven")["turns"]] == ["cancelled"]
