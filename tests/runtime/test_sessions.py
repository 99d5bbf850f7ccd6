"""Sessions: per-round scopes, duplicate ids across rounds, history boundaries, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.errors import ProviderHTTPError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.testing import (
    FunctionChatClient,
    RecordedCall,
    ScriptedChatClient,
    text,
    text_event,
    tool_call,
)
from tests.runtime.runtime_helpers import audits, collect, deltas, read_until


def _recording_registry(seen: list[tuple[str, str]], executed: list[str]) -> ToolRegistry:
    def resolve(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        seen.append((event.id, context.history[-1].content))
        return {"note": context.history[-1].content}

    def handle(event: ToolCallEvent) -> dict[str, Any]:
        executed.append(event.id)
        return {"tool": event.name, "note": event.arguments["note"]}

    return ToolRegistry(
        [
            ToolDefinition(
                name="notes.add",
                description="Keep a note.",
                parameters={
                    "type": "object",
                    "properties": {"note": {"type": "string"}},
                    "required": ["note"],
                },
                handler=handle,
                argument_resolver=resolve,
            )
        ]
    )


@pytest.mark.asyncio
async def test_same_event_id_in_two_rounds_runs_twice_with_its_own_history() -> None:
    seen: list[tuple[str, str]] = []
    executed: list[str] = []
    client = ScriptedChatClient(
        [
            [StreamItem.message_delta("first look"), text_event("evt-same", "notes.add")],
            [StreamItem.message_delta("second look"), text_event("evt-same", "notes.add")],
            text("all noted"),
        ]
    )
    request = DebugRunRequest(
        user_message="take notes",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["notes.add"], max_event_loops=2),
    )
    runtime = DebugRuntime(client, registry=_recording_registry(seen, executed))
    outputs = await collect(runtime.run(request))

    assert executed == ["evt-same", "evt-same"]
    assert seen == [("evt-same", "first look"), ("evt-same", "second look")]
    scopes = [a["details"]["scope"] for a in audits(outputs, "event_batch_started")]
    assert [scope.rsplit(":", 1)[1] for scope in scopes] == ["round-1", "round-2"]
    assert len(set(scopes)) == 2
    assert deltas(outputs)[-1] == "all noted"


def _direct_session(tools: list[str]) -> DebugRunRequest:
    return DebugRunRequest(
        user_message="first",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=tools, max_event_loops=2),
        tool_invocation_mode="chat_agent_tools",
    )


def _counting_registry(executed: list[str]) -> ToolRegistry:
    def count(event: ToolCallEvent) -> dict[str, Any]:
        executed.append(event.id)
        return {"count": len(executed)}

    return ToolRegistry(
        [
            ToolDefinition(
                name="counter",
                description="Counts.",
                parameters={"type": "object"},
                handler=count,
            )
        ]
    )


@pytest.mark.asyncio
async def test_provider_call_id_reused_in_a_later_session_turn_is_rejected_before_running() -> None:
    executed: list[str] = []
    client = ScriptedChatClient(
        [
            [tool_call("dup-id", "counter")],
            text("counted once"),
            [tool_call("fresh-id", "counter"), tool_call("dup-id", "counter")],
        ]
    )
    runtime = DebugRuntime(client, registry=_counting_registry(executed))
    queues = runtime.start_session(_direct_session(["counter"]))
    first = await read_until(queues, {"turn_completed", "error"})
    await queues.input.put(ChatMessage(role="user", content="again"))
    second = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    assert first[-1]["type"] == "turn_completed"
    assert second[-1]["type"] == "error"
    assert "duplicate provider tool-call ID: dup-id" in second[-1]["message"]
    assert executed == ["dup-id"]
    assert not any(m["type"] == "tool_result" for m in second)


@pytest.mark.asyncio
async def test_session_survives_a_provider_failure_and_answers_the_next_turn() -> None:
    client = ScriptedChatClient([ProviderHTTPError(503, "upstream overloaded"), text("back again")])
    request = DebugRunRequest(user_message="hello", chat_agent=AgentParams(model="m"))
    runtime = DebugRuntime(client)
    queues = runtime.start_session(request)
    first = await read_until(queues, {"turn_completed", "error"})
    await queues.input.put("are you there?")
    second = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    error = first[-1]
    assert error["type"] == "error"
    assert "503" in error["message"] and "upstream overloaded" in error["message"]
    assert "Traceback" not in error["message"]
    assert error["failure_reason"] == "provider_error:http_503"
    assert second[-1]["type"] == "turn_completed"
    assert deltas(second) == ["back again"]
    transcript = client.calls[1].messages
    assert [(m.role, m.content) for m in transcript] == [
        ("user", "hello"),
        ("user", "are you there?"),
    ]


@pytest.mark.asyncio
async def test_event_agent_history_in_sessions_holds_only_user_and_assistant_messages() -> None:
    client = ScriptedChatClient(
        [
            [StreamItem.message_delta("Noting it."), text_event("e1", "notes.add")],
            text("Noted."),
            [StreamItem.message_delta("Again."), text_event("e2", "notes.add")],
            text("Noted twice."),
        ]
    )
    seen: list[tuple[str, str]] = []
    executed: list[str] = []
    request = DebugRunRequest(
        user_message="first",
        system_prompts=["root prompt"],
        pre_messages=[
            ChatMessage(role="system", content="pre system"),
            ChatMessage(role="user", content="pre user", name="alice"),
            ChatMessage(role="assistant", content="pre assistant"),
        ],
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["notes.add"], max_event_loops=1),
    )
    runtime = DebugRuntime(client, registry=_recording_registry(seen, executed))
    queues = runtime.start_session(request)
    outputs = await read_until(queues, {"turn_completed"})
    await queues.input.put(ChatMessage(role="user", content="second"))
    outputs += await read_until(queues, {"turn_completed"})
    await runtime.aclose()

    second_history = audits(outputs, "event_agent_request")[1]["details"]["history"]
    assert [(m["role"], m["content"]) for m in second_history] == [
        ("user", "pre user"),
        ("assistant", "pre assistant"),
        ("user", "first"),
        ("assistant", "Noting it."),
        ("assistant", "Noted."),
        ("user", "second"),
        ("assistant", "Again."),
    ]
    assert all(m["name"] is None for m in second_history)
    # the chat agent, by contrast, still sees the event agent's results message
    assert any(m.name == "event_agent" for m in client.calls[2].messages)


@pytest.mark.asyncio
async def test_cancel_turn_stops_the_turn_and_the_session_continues() -> None:
    release = asyncio.Event()

    async def slow(event: ToolCallEvent) -> dict[str, Any]:
        await release.wait()
        return {"ok": True}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="slow", description="Slow.", parameters={"type": "object"}, handler=slow
            )
        ]
    )
    client = ScriptedChatClient([[tool_call("s1", "slow")], text("fresh start")])
    runtime = DebugRuntime(client, registry=registry)
    queues = runtime.start_session(_direct_session(["slow"]))
    await read_until(queues, {"event"})
    await asyncio.sleep(0.05)
    assert runtime.cancel_turn() is True
    cancelled = await read_until(queues, {"error", "turn_completed"})
    await queues.input.put("next")
    after = await read_until(queues, {"error", "turn_completed"})
    await runtime.aclose()

    assert cancelled[-1]["type"] == "error"
    assert cancelled[-1]["failure_reason"] == "cancelled"
    assert after[-1]["type"] == "turn_completed"
    sent = client.calls[1].messages
    assert [m.role for m in sent] == ["user", "user", "system"]
    # the cut-off call's handler had started: the model hears it may have run
    assert sent[-1].content.startswith("Recovered tool results:")
    assert '"event_id": "s1", "event_name": "slow", "status": "unknown"' in sent[-1].content


@pytest.mark.asyncio
async def test_closing_the_input_ends_the_session_with_done() -> None:
    client = ScriptedChatClient([text("hi")])
    runtime = DebugRuntime(client)
    queues = runtime.start_session(
        DebugRunRequest(user_message="hello", chat_agent=AgentParams(model="m"))
    )
    await read_until(queues, {"turn_completed"})
    await queues.input.put(None)
    tail = await read_until(queues, {"done"})
    await asyncio.wait_for(runtime._wait_for_tasks(), timeout=1)
    assert [m["event"] for m in tail if m["type"] == "audit"] == ["session_finished"]
    assert not runtime.running


@pytest.mark.asyncio
async def test_leaving_run_early_stops_the_turn() -> None:
    release = asyncio.Event()

    async def wait_forever(event: ToolCallEvent) -> dict[str, Any]:
        await release.wait()
        return {}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="wait",
                description="Waits.",
                parameters={"type": "object"},
                handler=wait_forever,
            )
        ]
    )
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(client, registry=registry)
    stream = runtime.run(_direct_session(["wait"]))
    async for message in stream:
        if message["type"] == "event":
            break
    assert isinstance(stream, AsyncGenerator)
    await stream.aclose()
    assert not runtime.running


@pytest.mark.asyncio
async def test_a_session_started_without_a_message_times_its_first_turn_from_the_input() -> None:
    class StepClock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

    clock = StepClock()
    runtime = DebugRuntime(ScriptedChatClient([text("hi")]), clock=clock)
    queues = runtime.start_session(DebugRunRequest(chat_agent=AgentParams(model="m")))
    await read_until(queues, {"session_started"})
    clock.now = 60.0  # a minute of idle time before the user speaks
    await queues.input.put("hello")
    outputs = await read_until(queues, {"turn_completed"})
    await runtime.aclose()
    elapsed = [m["details"]["turn_elapsed_ms"] for m in outputs if m["type"] == "audit"]
    assert elapsed and max(elapsed) == 0
    assert outputs[-1] == {"type": "turn_completed", "turn_index": 1, "round_count": 1}


@pytest.mark.asyncio
async def test_cancel_turn_from_inside_the_turn_cancels_it_and_the_session_continues() -> None:
    asked: list[bool] = []

    async def model(call: RecordedCall) -> AsyncIterator[StreamItem]:
        """The first stream asks the runtime to cancel the turn from inside the turn
        (the session's own task), then waits for ever; later streams answer."""
        yield StreamItem.message_delta("Let me")
        if not asked:
            asked.append(runtime.cancel_turn())
            await asyncio.Event().wait()
        yield StreamItem.message_delta(" answer.")

    runtime = DebugRuntime(FunctionChatClient(model))
    queues = runtime.start_session(DebugRunRequest(chat_agent=AgentParams(model="m")))
    await queues.input.put("First")
    cancelled = await asyncio.wait_for(read_until(queues, {"error", "turn_completed"}), 5)
    await queues.input.put("Second")
    after = await read_until(queues, {"error", "turn_completed"})
    await runtime.aclose()

    assert asked == [True]
    assert cancelled[-1]["type"] == "error"
    assert cancelled[-1]["failure_reason"] == "cancelled"
    assert after[-1]["type"] == "turn_completed"
    assert "".join(m["content"] for m in after if m["type"] == "message_delta") == (
        "Let me answer."
    )
