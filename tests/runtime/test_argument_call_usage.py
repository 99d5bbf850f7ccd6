"""Every model call of a turn puts its token usage on the output queue, the event agent's
argument calls included, so what a consumer sums from the live stream is what the store
reports (``usage_summary``), over a real SSE stream in both modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion}}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


def orders_registry(resolver: str) -> ToolRegistry:
    """``orders.lookup`` without a resolver, or with one whose arguments never fit."""
    return ToolRegistry(
        [
            ToolDefinition(
                name="orders.lookup",
                description="Look up an order.",
                parameters=ORDER_SCHEMA,
                handler=lambda event: {"tool": event.name, "status": "shipped"},
                argument_resolver=(lambda event, context: {}) if resolver == "failing" else None,
            )
        ]
    )


def answers(mode: ToolInvocationMode) -> list[ScriptedResponse]:
    """Chat (100+10), in dual mode the forced argument call (50+5), follow-up (200+20)."""
    if mode == "dual_agent":
        return [
            ScriptedResponse.sse(
                delta("Checking "), delta("<event>orders.lookup</event>"), usage(100, 10)
            ),
            ScriptedResponse.sse(
                tool_call("arg-1", "orders__lookup", {"order_id": "A-17"}), usage(50, 5)
            ),
            ScriptedResponse.sse(delta("It shipped."), usage(200, 20)),
        ]
    return [
        ScriptedResponse.sse(
            delta("Checking "),
            tool_call("call-1", "orders__lookup", {"order_id": "A-17"}),
            usage(100, 10),
        ),
        ScriptedResponse.sse(delta("It shipped."), usage(200, 20)),
    ]


async def run_turn(
    tmp_path: Path, mode: ToolInvocationMode, resolver: str = "none"
) -> tuple[list[dict[str, Any]], dict[str, Any], SSETranscriptServer]:
    """One persisted turn over HTTP; its outputs and the store's usage summary."""
    store = SQLiteSessionStore(tmp_path / "usage.sqlite3")
    request = DebugRunRequest(
        user_message="where is order A-17",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["orders.lookup"]),
        tool_invocation_mode=mode,
    )
    with SSETranscriptServer(*answers(mode)) as server:
        async with OpenAICompatibleChatClient(server.base_url, api_key="k") as client:
            runtime = DebugRuntime(client, registry=orders_registry(resolver), session_store=store)
            outputs: list[dict[str, Any]] = [dict(m) async for m in runtime.run(request)]
    session_id = next(m["session_id"] for m in outputs if m["type"] == "session_started")
    summary = store.usage_summary(session_id)
    store.close()
    return outputs, summary, server


def usage_totals(outputs: list[dict[str, Any]]) -> list[int]:
    return [m["usage"]["total_tokens"] for m in outputs if m["type"] == "usage"]


@pytest.mark.asyncio
@pytest.mark.parametrize("resolver", ["none", "failing"])
async def test_an_argument_call_puts_its_usage_on_the_output_queue(
    tmp_path: Path, resolver: str
) -> None:
    outputs, summary, server = await run_turn(tmp_path, "dual_agent", resolver)

    forced = [request.json().get("tool_choice") for request in server.requests]
    assert forced == [None, {"type": "function", "function": {"name": "orders__lookup"}}, None]
    assert usage_totals(outputs) == [110, 55, 220]
    assert sum(usage_totals(outputs)) == summary["session"]["total_tokens"] == 385
    assert len(usage_totals(outputs)) == summary["session"]["model_calls"] == 3
    kinds = {call["call_kind"] for call in summary["calls"]}
    assert ("argument_fallback" if resolver == "failing" else "argument_generation") in kinds


@pytest.mark.asyncio
async def test_the_argument_calls_usage_is_out_before_its_tool_result_and_not_in_round_stats(
    tmp_path: Path,
) -> None:
    outputs, _, _ = await run_turn(tmp_path, "dual_agent")
    shown = [m for m in outputs if m["type"] != "audit"]
    kinds = [m["type"] for m in shown]

    assert kinds.index("tool_result") > 2 and kinds[kinds.index("tool_result") - 1] == "usage"
    assert shown[kinds.index("tool_result") - 1]["usage"] == {
        "prompt_tokens": 50,
        "completion_tokens": 5,
        "total_tokens": 55,
        "cached_tokens": 0,
    }
    response = next(m for m in outputs if m.get("event") == "event_agent_response")
    [resolution] = response["details"]["resolutions"]
    assert resolution["call"]["usage"]["total_tokens"] == 55
    rounds = [m["total_tokens"] for m in outputs if m["type"] == "round_stats"]
    assert rounds == [110, 220]  # a round's stats describe its chat call


@pytest.mark.asyncio
async def test_chat_agent_tools_makes_no_argument_call_and_its_usage_is_unchanged(
    tmp_path: Path,
) -> None:
    """A guard: this mode has no argument calls, so its outputs are as they were."""
    outputs, summary, server = await run_turn(tmp_path, "chat_agent_tools")

    assert server.request_count == 2
    assert usage_totals(outputs) == [110, 220]
    assert [m["total_tokens"] for m in outputs if m["type"] == "round_stats"] == [110, 220]
    assert sum(usage_totals(outputs)) == summary["session"]["total_tokens"] == 330
    assert len(usage_totals(outputs)) == summary["session"]["model_calls"] == 2
