"""Hard caps per turn: ``max_event_loops`` has an upper bound, and every turn stops at a
cap on rounds and on wall time with a clear error; the session goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError
from runtime_helpers import collect, read_until

from agent_lab.application import _turn
from agent_lab.application.contracts import (
    MAX_EVENT_LOOPS,
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.testing import tool_call


def test_max_event_loops_has_an_upper_bound() -> None:
    assert EventAgentParams(max_event_loops=MAX_EVENT_LOOPS).max_event_loops == MAX_EVENT_LOOPS
    with pytest.raises(ValidationError):
        EventAgentParams(max_event_loops=10**9)


class _LoopingClient:
    """Calls the tool in every round, forever."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        self.calls += 1
        yield tool_call(f"call-{self.calls}", "ping")


def _ping_registry() -> ToolRegistry:
    return ToolRegistry(
        [
            ToolDefinition(
                name="ping",
                description="Pings.",
                parameters={"type": "object"},
                handler=lambda event: {"pong": True},
            )
        ]
    )


@pytest.mark.asyncio
async def test_a_turn_stops_at_the_round_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_turn, "DEFAULT_TURN_LIMITS", _turn.TurnLimits(max_rounds=3))
    client = _LoopingClient()
    request = DebugRunRequest(
        user_message="loop",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["ping"], max_event_loops=10),
        tool_invocation_mode="chat_agent_tools",
    )
    outputs = await collect(DebugRuntime(client, registry=_ping_registry()).run(request))

    assert client.calls == 3
    assert outputs[-1]["type"] == "error"
    assert outputs[-1]["failure_reason"] == "turn_limit_exceeded:rounds"
    assert "3 rounds" in outputs[-1]["message"]


class _HangsOnceClient:
    """The first call never answers; later calls answer at once."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()
        yield StreamItem.message_delta("back")


@pytest.mark.asyncio
async def test_a_turn_stops_at_the_wall_time_cap_and_the_session_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_turn, "DEFAULT_TURN_LIMITS", _turn.TurnLimits(max_seconds=0.2))
    runtime = DebugRuntime(_HangsOnceClient())
    request = DebugRunRequest(user_message="hello", chat_agent=AgentParams(model="m"))
    queues = runtime.start_session(request)
    first = await read_until(queues, {"turn_completed", "error"}, seconds=30)
    await queues.input.put("again")
    second = await read_until(queues, {"turn_completed", "error"}, seconds=30)
    await runtime.aclose()

    assert first[-1]["type"] == "error"
    assert first[-1]["failure_reason"] == "turn_limit_exceeded:wall_time"
    assert second[-1]["type"] == "turn_completed"
    assert [m["content"] for m in second if m["type"] == "message_delta"] == ["back"]
