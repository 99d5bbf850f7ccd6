"""The executor's side of the effect ledger: each call that reaches its handler is
announced first, a failed announcement keeps the handler from running, and handlers
receive the call's idempotency key (DESIGN.md §9.4)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.events import (
    BatchAborted,
    EventBatch,
    EventBatchExecutor,
    EventSource,
    EventStatus,
    idempotency_key,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call

SCOPE = "session-1:turn-2:round-3"


def _event(call_id: str, name: str = "effect", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments)


class Trail:
    """What happened, in order: announcements and handler runs."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.keys: dict[str, str | None] = {}

    def registry(self) -> ToolRegistry:
        async def effect(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
            self.steps.append(("ran", event.id))
            self.keys[event.id] = context.idempotency_key
            return {"tool": event.name, "done": event.id}

        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return ToolRegistry(
            [
                ToolDefinition("effect", "Does something.", schema, effect),
                ToolDefinition("other", "Disabled here.", {"type": "object"}, effect),
            ]
        )

    async def announce(self, event: ToolCallEvent) -> None:
        self.steps.append(("dispatched", event.id))


def _batch(events: list[ToolCallEvent], trail: Trail, **extra: Any) -> EventBatch:
    return EventBatch(
        scope=SCOPE,
        events=events,
        source=EventSource.PROVIDER_TOOL_CALL,
        enabled_names=["effect"],
        context=ToolExecutionContext(session_id="session-1", turn_index=2, round_index=3),
        on_dispatch=extra.pop("on_dispatch", trail.announce),
        **extra,
    )


@pytest.mark.asyncio
async def test_each_call_is_announced_before_its_handler_runs_with_its_idempotency_key() -> None:
    trail = Trail()
    executor = EventBatchExecutor(trail.registry(), clock=time.monotonic, max_parallel=1)

    result = await executor.execute(_batch([_event("a"), _event("b")], trail))

    assert [r.status for r in result.results] == [EventStatus.SUCCESS, EventStatus.SUCCESS]
    assert trail.steps == [("dispatched", "a"), ("ran", "a"), ("dispatched", "b"), ("ran", "b")]
    assert trail.keys == {"a": f"{SCOPE}:a", "b": f"{SCOPE}:b"}
    assert idempotency_key(SCOPE, "a") == f"{SCOPE}:a"


@pytest.mark.asyncio
async def test_calls_that_never_reach_a_handler_are_not_announced() -> None:
    trail = Trail()
    executor = EventBatchExecutor(trail.registry(), clock=time.monotonic)
    events = [
        _event("unknown", "nope"),
        _event("disabled", "other"),
        _event("invalid", n="not a number"),
        _event("unresolved"),
        _event("runs", n=1),
    ]

    result = await executor.execute(_batch(events, trail, not_run={"unresolved": "no arguments"}))

    assert trail.steps == [("dispatched", "runs"), ("ran", "runs")]
    assert [r.status for r in result.results] == [EventStatus.FAILED] * 4 + [EventStatus.SUCCESS]


@pytest.mark.asyncio
async def test_a_failed_announcement_keeps_that_handler_and_later_ones_from_running() -> None:
    trail = Trail()
    executor = EventBatchExecutor(trail.registry(), clock=time.monotonic, max_parallel=1)

    async def refuse_second(event: ToolCallEvent) -> None:
        if event.id == "b":
            raise OSError("journal unavailable")
        await trail.announce(event)

    with pytest.raises(BatchAborted) as aborted:
        await executor.execute(
            _batch([_event("a"), _event("b"), _event("c")], trail, on_dispatch=refuse_second)
        )

    assert trail.steps == [("dispatched", "a"), ("ran", "a")]
    assert isinstance(aborted.value.cause, OSError)
    statuses = [r.status for r in aborted.value.partial.results]
    assert statuses == [EventStatus.SUCCESS, EventStatus.CANCELLED, EventStatus.CANCELLED]


@pytest.mark.asyncio
async def test_a_call_announced_before_another_fails_still_runs() -> None:
    """Once journaled as dispatched, a call runs: skipping it would leave the ledger
    claiming a dispatch that never happened."""
    trail = Trail()
    executor = EventBatchExecutor(trail.registry(), clock=time.monotonic, max_parallel=2)
    both_announced = asyncio.Event()
    announced: list[str] = []

    async def slow_then_fail(event: ToolCallEvent) -> None:
        announced.append(event.id)
        if len(announced) == 2:
            both_announced.set()
        if event.id == "b":
            raise OSError("journal unavailable")
        await both_announced.wait()  # "b" fails while "a" is already journaled

    with pytest.raises(BatchAborted):
        await executor.execute(
            _batch([_event("a"), _event("b")], trail, on_dispatch=slow_then_fail)
        )

    assert trail.steps == [("ran", "a")]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_handlers_receive_the_calls_idempotency_key_in_both_modes(mode: str) -> None:
    trail = Trail()
    call = text_event("k1", "effect") if mode == "dual_agent" else tool_call("k1", "effect")
    client = ScriptedChatClient([[call], text("done")])
    runtime = DebugRuntime(client, registry=trail.registry())
    request = DebugRunRequest(
        user_message="go",
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=["effect"], max_event_loops=1),
        tool_invocation_mode=mode,
    )

    outputs: list[dict[str, Any]] = [dict(output) async for output in runtime.run(request)]

    assert outputs[-1] == {"type": "done"}
    started = next(o for o in outputs if o.get("event") == "event_batch_started")
    assert trail.keys == {"k1": f"{started['details']['scope']}:k1"}
