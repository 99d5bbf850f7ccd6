"""Runtime with a real SQLite store: restore repair, fallback cost, measured wall time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call
from tests.runtime.runtime_helpers import read_until


def _call(call_id: str) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name="lookup", arguments={}, raw_arguments="{}")


def _lookup_registry() -> ToolRegistry:
    return ToolRegistry(
        [
            ToolDefinition(
                name="lookup",
                description="Looks up.",
                parameters={"type": "object"},
                handler=lambda event: {"ok": True},
            )
        ]
    )


@pytest.mark.asyncio
async def test_reconnect_repairs_a_broken_direct_transcript(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    session_id = store.create_session("broken", {}, session_id="broken")
    store.start_turn(session_id, 1, "q1")
    stored = [
        ChatMessage(role="user", content="q1"),
        ChatMessage(role="assistant", content="", tool_calls=[_call("a"), _call("b")]),
        ChatMessage(role="tool", content='{"ok": 1}', name="lookup", tool_call_id="a"),
        ChatMessage(role="tool", content='{"ok": 2}', name="lookup", tool_call_id="b"),
        ChatMessage(role="assistant", content="answer one"),
        ChatMessage(role="tool", content='{"orphan": true}', name="lookup", tool_call_id="zz"),
        ChatMessage(role="assistant", content="half said", tool_calls=[_call("c"), _call("d")]),
        ChatMessage(role="tool", content='{"partial": true}', name="lookup", tool_call_id="c"),
        ChatMessage(role="assistant", content="   ", tool_calls=[_call("e")]),
    ]
    store.append_messages(session_id, 1, stored)
    store.complete_turn(session_id, 1)

    client = ScriptedChatClient([text("fresh answer")])
    request = DebugRunRequest(
        session_id=session_id,
        user_message="new question",
        system_prompts=["sys"],
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["lookup"]),
        tool_invocation_mode="chat_agent_tools",
    )
    runtime = DebugRuntime(client, registry=_lookup_registry(), session_store=store)
    outputs = await read_until(runtime.start_session(request), {"turn_completed", "error"})
    await runtime.aclose()

    assert not any(m["type"] == "error" for m in outputs)
    sent = client.calls[0].messages
    validate_tool_transcript(sent)
    assert [(m.role, m.content, [c.id for c in m.tool_calls]) for m in sent] == [
        ("system", "sys", []),
        ("user", "q1", []),
        ("assistant", "", ["a", "b"]),
        ("tool", '{"ok": 1}', []),
        ("tool", '{"ok": 2}', []),
        ("assistant", "answer one", []),
        ("assistant", "half said", []),
        ("user", "new question", []),
    ]


def _fallback_registry(executed: list[dict[str, Any]]) -> ToolRegistry:
    def search(event: ToolCallEvent) -> dict[str, Any]:
        executed.append(event.arguments)
        return {"hits": 0}

    return ToolRegistry(
        [
            ToolDefinition(
                name="kb.search",
                description="Search.",
                parameters={
                    "type": "object",
                    "properties": {"query": {"type": "string", "minLength": 1}},
                    "required": ["query"],
                },
                handler=search,
                argument_resolver=lambda event, context: {"query": ""},
            )
        ]
    )


@pytest.mark.asyncio
async def test_argument_fallback_is_one_forced_call_counted_once(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    executed: list[dict[str, Any]] = []
    fallback_call = ToolCallEvent(
        id="fb",
        name="kb.search",
        arguments={"query": "wal mode"},
        raw_arguments='{"query":"wal mode"}',
    )
    client = ScriptedChatClient(
        rounds=[
            [
                text_event("evt-1", "kb.search"),
                StreamItem.usage_item(
                    TokenUsage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
                ),
            ],
            text(
                "found it", usage=TokenUsage(prompt_tokens=20, completion_tokens=3, total_tokens=23)
            ),
        ],
        argument_rounds=[
            [
                StreamItem.raw_response_chunk({"choices": []}),
                StreamItem.provider_tool_call(fallback_call),
                StreamItem.usage_item(
                    TokenUsage(
                        prompt_tokens=7, completion_tokens=5, total_tokens=12, cached_tokens=4
                    )
                ),
            ]
        ],
    )
    request = DebugRunRequest(
        session_id="fallback",
        user_message="search wal mode",
        chat_agent=AgentParams(model="chat-m"),
        event_agent=EventAgentParams(
            model="event-m", enabled_tools=["kb.search"], max_event_loops=1
        ),
    )
    runtime = DebugRuntime(client, registry=_fallback_registry(executed), session_store=store)
    await read_until(runtime.start_session(request), {"turn_completed"})
    await runtime.aclose()

    client.assert_complete()
    assert len(client.argument_calls) == 1
    forced = client.argument_calls[0]
    assert forced.forced_tool == "kb.search" and forced.params.model == "event-m"
    assert executed == [{"query": "wal mode"}]
    summary = store.usage_summary("fallback")
    fallbacks = [c for c in summary["calls"] if c["call_kind"] == "argument_fallback"]
    assert len(fallbacks) == 1
    fallback = fallbacks[0]
    assert fallback["agent"] == "event_agent"
    assert (fallback["event_id"], fallback["event_name"]) == ("evt-1", "kb.search")
    assert fallback["metric_key"] == "fallback:1:1:evt-1"
    assert fallback["total_tokens"] == 12 and fallback["cached_tokens"] == 4
    assert fallback["ttft_ms"] is not None
    assert summary["session"]["fallback_count"] == 1
    assert summary["session"]["total_tokens"] == 12 + 12 + 23


@pytest.mark.asyncio
async def test_parallel_tools_have_their_own_latency_and_a_measured_wall_time(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    running = 0
    overlap = 0

    async def nap(event: ToolCallEvent) -> dict[str, Any]:
        nonlocal running, overlap
        running += 1
        overlap = max(overlap, running)
        await asyncio.sleep(0.2)
        running -= 1
        return {"slept": event.id}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="nap", description="Naps.", parameters={"type": "object"}, handler=nap
            )
        ]
    )
    client = ScriptedChatClient([[tool_call("n1", "nap"), tool_call("n2", "nap")], text("rested")])
    request = DebugRunRequest(
        session_id="parallel",
        user_message="nap twice",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["nap"], max_parallel_events=2),
        tool_invocation_mode="chat_agent_tools",
    )
    runtime = DebugRuntime(client, registry=registry, session_store=store)
    await read_until(runtime.start_session(request), {"turn_completed"})
    await runtime.aclose()

    assert overlap == 2
    summary = store.usage_summary("parallel")
    tools = [c for c in summary["calls"] if c["call_kind"] == "tool_execution"]
    assert [c["metric_key"] for c in tools] == ["tool:1:1:n1", "tool:1:1:n2"]
    assert all(c["tool_latency_ms"] >= 190 for c in tools)
    wall = summary["turns"][0]["turn_wall_time_ms"]
    assert wall >= 190
    assert wall < sum(c["tool_latency_ms"] for c in tools)
