"""The ``TypedDict`` vocabulary describes exactly what the runtime puts on its output."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import TypeAdapter

from agent_lab.application import protocol
from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.errors import ProviderHTTPError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem, TokenUsage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call


def _schema(kind: str) -> Any:
    for cls in get_args(protocol.OutputMessage):
        hints = cls.__annotations__
        if f"Literal['{kind}']" in str(hints["type"]):
            return cls
    raise AssertionError(f"no TypedDict for {kind!r}")


def _registry() -> ToolRegistry:
    def note(event: ToolCallEvent) -> dict[str, Any]:
        return {"noted": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name="note",
                description="Takes a note.",
                parameters={"type": "object"},
                handler=note,
                argument_resolver=lambda event, context: {},
            )
        ]
    )


def _request(mode: ToolInvocationMode, message: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=f"vocabulary-{mode}",
        user_message=message,
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["note"], max_event_loops=1),
        tool_invocation_mode=mode,
    )


async def _outputs(mode: ToolInvocationMode, tmp_path: Path) -> list[protocol.OutputMessage]:
    event = text_event("e1", "note") if mode == "dual_agent" else tool_call("e1", "note")
    usage = StreamItem.usage_item(TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5))
    client = ScriptedChatClient(
        [
            [StreamItem.message_delta("noting"), event, usage],
            text("noted"),
            ProviderHTTPError(503, "overloaded"),
        ]
    )
    store = SQLiteSessionStore(tmp_path / f"{mode}.sqlite3")
    runtime = DebugRuntime(client, registry=_registry(), session_store=store)
    seen: list[protocol.OutputMessage] = []
    async with runtime.session(_request(mode, "take a note")) as session:
        async for message in session:
            seen.append(message)
            if message["type"] == "turn_completed":
                await session.send("and fail")
            if message["type"] == "error":
                await session.close()
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_every_output_message_matches_its_typed_dict(
    mode: ToolInvocationMode, tmp_path: Path
) -> None:
    outputs = await _outputs(mode, tmp_path)
    kinds = {message["type"] for message in outputs}
    assert kinds == set(get_args(protocol.OutputType))  # every type was exercised
    for message in outputs:
        schema = _schema(message["type"])
        keys = set(message)
        assert (
            schema.__required_keys__
            <= keys
            <= schema.__required_keys__ | (schema.__optional_keys__)
        ), message
        TypeAdapter(schema).validate_python(message, strict=True)
        if message["type"] == "audit":
            assert message["event"] in get_args(protocol.AuditName), message["event"]
