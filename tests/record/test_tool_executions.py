"""Each tool execution in the record: arguments, status, result, latency, policy; each
failure with a reason code and a readable message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from record_support import answer, assert_same_records, reopened, request, run_once, tool_calls

from agent_lab.application._audit_details import RESULT_CAP_CHARS
from agent_lab.application.events import ResultPolicy
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.testing.sse_server import SSETranscriptServer

BIG = "x" * (RESULT_CAP_CHARS + 10)


def _registry() -> ToolRegistry:
    def boom(event: Any) -> dict[str, Any]:
        raise RuntimeError("the backend is down")

    def big(event: Any) -> dict[str, Any]:
        return {"tool": "big", "text": BIG}

    def echo(event: Any) -> dict[str, Any]:
        return {"tool": "echo", "said": event.arguments["text"]}

    def tool(name: str, handler: Any, **extra: Any) -> ToolDefinition:
        return ToolDefinition(
            name=name,
            description=name,
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
            handler=handler,
            **extra,
        )

    return ToolRegistry(
        [
            tool("boom", boom),
            tool("big", big),
            tool("echo", echo, result_policy=ResultPolicy.FOLLOW_UP),
        ]
    )


@pytest.mark.asyncio
async def test_tool_executions_and_their_failures_are_recorded(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(
        tool_calls(
            ("c1", "echo", {"text": "hi"}),
            ("c2", "boom", {}),
            ("c3", "nope", {}),
            ("c4", "big", {}),
        ),
        answer("Some of that failed."),
    )
    database = tmp_path / "sessions.sqlite3"
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("chat_agent_tools", ["echo", "boom", "big"], "go"),
        _registry(),
    )

    assert outputs[-1] == {"type": "done"}
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    tools = {t.event_id: t for t in record.tool_executions}
    echo = tools["c1"]
    assert (echo.status, echo.arguments, echo.result) == (
        "succeeded",
        {"text": "hi"},
        {"tool": "echo", "said": "hi"},
    )
    assert echo.policy == "follow_up" and echo.latency_ms is not None
    assert echo.metric_key == "tool:1:1:c1"
    assert tools["c2"].status == "failed"
    assert tools["c2"].failure_reason == "tool_failed:handler_error"
    assert tools["c3"].failure_reason == "tool_failed:unknown_tool"
    big = tools["c4"]
    assert big.status == "succeeded" and big.result is None
    assert big.result_capped is not None
    assert big.result_capped.original_chars > RESULT_CAP_CHARS
    failures = {f.ref: f for f in record.failures}
    assert failures["tool:1:1:c2"].message == "tool handler failed: the backend is down"
    assert failures["tool:1:1:c3"].message == "unknown tool"
    assert record.status == "completed" and record.failure is None
