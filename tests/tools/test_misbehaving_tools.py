"""Tools that misbehave: exiting, hanging, returning non-JSON values, ignoring cancellation.

Each case goes through the public API (a registry, or a whole ``DebugRuntime`` turn) and
checks that the misbehaviour becomes that tool's error payload while the rest goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tool_workers import (
    MAX_OVERDUE_PER_TOOL,
    WORKER_THREADS,
    overdue_calls,
)
from agent_lab.application.tools import (
    ToolDefinition,
    ToolRegistry,
    build_default_tool_registry,
)
from agent_lab.domain.events import ToolCallEvent
from agent_lab.testing import ScriptedChatClient, text, tool_call

ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}


def tool(name: str, handler: Callable[..., Any], **overrides: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"The {name} tool.",
        parameters=ANY_ARGUMENTS,
        handler=handler,
        **overrides,
    )


def call(name: str, call_id: str = "c-1", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments)


def request(tools: list[str]) -> DebugRunRequest:
    return DebugRunRequest(
        user_message="please handle it",
        chat_agent=AgentParams(model="chat-model"),
        event_agent=EventAgentParams(enabled_tools=tools, max_event_loops=2),
        tool_invocation_mode="chat_agent_tools",
    )


def tool_results(outputs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        m["message"]["tool_call_id"]: json.loads(m["message"]["content"])
        for m in outputs
        if m["type"] == "tool_result"
    }


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so hung handler threads return."""
    event = threading.Event()
    yield event
    event.set()


# --- item 4: SystemExit and other BaseExceptions ----------------------------------


def exits(event: ToolCallEvent) -> dict[str, Any]:
    sys.exit(3)


async def exits_async(event: ToolCallEvent) -> dict[str, Any]:
    raise SystemExit("bye")


async def interrupts(event: ToolCallEvent) -> dict[str, Any]:
    raise KeyboardInterrupt


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (exits, "tool handler failed: SystemExit: 3"),
        (exits_async, "tool handler failed: SystemExit: bye"),
        (interrupts, "tool handler failed: KeyboardInterrupt"),
    ],
)
async def test_a_tool_that_exits_becomes_its_error_payload(
    handler: Callable[..., Any], error: str
) -> None:
    registry = ToolRegistry([tool("quitter", handler)])

    outcome = await registry.run(call("quitter"))

    assert outcome.payload == {"tool": "quitter", "error": error}
    assert outcome.ok is False


@pytest.mark.asyncio
async def test_a_turn_continues_after_a_tool_calls_sys_exit() -> None:
    registry = ToolRegistry([tool("quitter", exits), tool("quitter.async", exits_async)])
    client = ScriptedChatClient(
        [
            [tool_call("c-sync", "quitter"), tool_call("c-async", "quitter.async")],
            text("Both tools failed, sorry."),
        ]
    )
    runtime = DebugRuntime(client, registry=registry)

    outputs = [m async for m in runtime.run(request(["quitter", "quitter.async"]))]

    client.assert_complete()
    assert tool_results(outputs) == {
        "c-sync": {"tool": "quitter", "error": "tool handler failed: SystemExit: 3"},
        "c-async": {"tool": "quitter.async", "error": "tool handler failed: SystemExit: bye"},
    }
    assert outputs[-1] == {"type": "done"}


@pytest.mark.asyncio
async def test_a_resolver_that_exits_resolves_nothing() -> None:
    def resolve_by_exiting(event: ToolCallEvent, context: Any) -> dict[str, Any]:
        sys.exit(4)

    registry = ToolRegistry([tool("quitter", exits, argument_resolver=resolve_by_exiting)])

    resolved = await registry.resolve_arguments(call("quitter"), context=_context())

    assert resolved is None


def _context() -> Any:
    from agent_lab.application.tools import ToolExecutionContext

    return ToolExecutionContext()


# --- item 5: hung sync handlers do not starve other tools -------------------------


@pytest.mark.asyncio
async def test_hung_sync_handlers_past_their_timeout_do_not_starve_other_tools(
    release: threading.Event,
) -> None:
    hung = WORKER_THREADS + 6  # more than the pool ever had

    def hang(event: ToolCallEvent) -> dict[str, Any]:
        release.wait(timeout=60)
        return {"tool": event.name}

    names = [f"hang.{n}" for n in range(hung)]
    registry = build_default_tool_registry()
    for name in names:
        registry.register(tool(name, hang, timeout_seconds=0.2))

    stuck = await asyncio.gather(*(registry.run(call(name)) for name in names))
    volume = await registry.run(
        call("device.volume.adjust", mode="absolute", value=30), enabled_names=None
    )

    assert {o.payload["error"] for o in stuck} == {"tool handler failed: timed out after 0.2s"}
    assert volume.ok, volume.payload
    assert volume.payload == {"tool": "device.volume.adjust", "previous": 50, "volume": 30}
    # every thread a hung handler holds is accounted for; calls still queued at their
    # timeout never started and hold nothing
    assert sum(overdue_calls().get(name, 0) for name in names) == WORKER_THREADS


@pytest.mark.asyncio
async def test_a_tool_holding_too_many_overdue_calls_is_refused_at_once(
    release: threading.Event,
) -> None:
    ran: list[str] = []

    def hang(event: ToolCallEvent) -> dict[str, Any]:
        ran.append(event.id)
        release.wait(timeout=60)
        return {"tool": event.name}

    registry = ToolRegistry([tool("stuck", hang, timeout_seconds=0.1)])
    for n in range(MAX_OVERDUE_PER_TOOL):
        await registry.run(call("stuck", f"c-{n}"))

    refused = await registry.run(call("stuck", "c-next"))

    assert refused.payload == {
        "tool": "stuck",
        "error": f"tool handler failed: {MAX_OVERDUE_PER_TOOL} earlier calls of this tool "
        "are still running past their timeout",
    }
    assert "c-next" not in ran
    release.set()
    for _ in range(200):  # the handlers return; the tool is usable again
        if overdue_calls().get("stuck", 0) == 0:
            break
        await asyncio.sleep(0.01)
    assert (await registry.run(call("stuck", "c-after"))).payload == {"tool": "stuck"}


# --- item 9: non-JSON results -----------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.mark.asyncio
async def test_results_are_converted_to_json_the_way_the_store_converts_them() -> None:
    when = datetime(2026, 7, 14, 9, 30, tzinfo=UTC)

    def odd_values(event: ToolCallEvent) -> dict[str, Any]:
        return {
            "tool": "odd",
            "when": when,
            "tags": {"b"},
            "pair": (1, 2),
            "colour": Colour.RED,
            "point": Point(1, 2),
            "path": Path("/tmp/x"),
        }

    registry = ToolRegistry([tool("odd", odd_values)])

    outcome = await registry.run(call("odd"))

    assert outcome.ok
    assert outcome.payload == {
        "tool": "odd",
        "when": "2026-07-14T09:30:00+00:00",
        "tags": ["b"],
        "pair": [1, 2],
        "colour": "red",
        "point": {"x": 1, "y": 2},
        "path": "/tmp/x",
    }


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "result",
    [b"raw bytes", {"tool": "odd", (1, 2): "tuple key"}, {"tool": "odd", "x": object()}],
    ids=["bytes", "tuple-key", "object"],
)
async def test_a_result_json_cannot_hold_becomes_an_error_payload(result: Any) -> None:
    registry = ToolRegistry([tool("odd", lambda event: result)])

    outcome = await registry.run(call("odd"))

    assert outcome.ok is False
    assert outcome.payload["tool"] == "odd"
    assert outcome.payload["error"].startswith(
        "tool handler failed: the tool result cannot be stored as JSON: "
    )


@pytest.mark.asyncio
async def test_a_turn_completes_when_a_tool_returns_a_datetime_and_bytes() -> None:
    registry = ToolRegistry(
        [
            tool("clock", lambda event: {"now": datetime(2026, 1, 1, tzinfo=UTC)}),
            tool("blob", lambda event: b"\x00\x01"),
        ]
    )
    client = ScriptedChatClient(
        [[tool_call("c-clock", "clock"), tool_call("c-blob", "blob")], text("Done.")]
    )

    outputs = [
        m async for m in DebugRuntime(client, registry=registry).run(request(["clock", "blob"]))
    ]

    results = tool_results(outputs)
    assert results["c-clock"] == {"now": "2026-01-01T00:00:00+00:00"}
    assert results["c-blob"]["error"].startswith("tool handler failed: the tool result cannot")
    assert outputs[-1] == {"type": "done"}


# --- item 14: async handlers that swallow CancelledError ----------------------------


class Runaway:
    """An async handler that ignores every cancellation until told to stop."""

    def __init__(self) -> None:
        self.stop = False
        self.cancellations = 0

    async def __call__(self, event: ToolCallEvent) -> dict[str, Any]:
        while not self.stop:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancellations += 1
        return {"tool": event.name}


@pytest.mark.asyncio
async def test_an_async_handler_swallowing_cancellation_ends_at_its_timeout() -> None:
    runaway = Runaway()
    registry = ToolRegistry([tool("runaway", runaway, timeout_seconds=0.1)])
    try:
        outcome = await asyncio.wait_for(registry.run(call("runaway")), timeout=5)
        reported = overdue_calls().get("runaway", 0)
    finally:
        runaway.stop = True

    assert outcome.payload == {
        "tool": "runaway",
        "error": "tool handler failed: timed out after 0.1s; "
        "it ignored cancellation and was abandoned",
    }
    assert runaway.cancellations >= 1
    assert reported == 1


@pytest.mark.asyncio
async def test_aclose_returns_while_an_async_handler_swallows_cancellation() -> None:
    runaway = Runaway()
    registry = ToolRegistry([tool("runaway", runaway, timeout_seconds=None)])
    client = ScriptedChatClient([[tool_call("c-1", "runaway")], text("never reached")])
    runtime = DebugRuntime(client, registry=registry)
    queues = runtime.start(request(["runaway"]))
    try:
        while True:  # until the tool is running
            message = await asyncio.wait_for(queues.output.get(), timeout=5)
            if message["type"] == "audit" and message["event"] == "event_batch_started":
                break
        await asyncio.sleep(0.05)

        await asyncio.wait_for(runtime.aclose(), timeout=5)

        assert not runtime.running
        assert runaway.cancellations >= 1
    finally:
        runaway.stop = True
