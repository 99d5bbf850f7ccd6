"""Helpers shared by the runtime tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeAlias

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.queues import RuntimeQueues

Output: TypeAlias = Mapping[str, Any]
"""An output message read by key, the way a test inspects it."""


def tools_request(
    mode: ToolInvocationMode, tools: list[str], loops: int = 1, user: str = "please handle it"
) -> DebugRunRequest:
    """A one-shot request in ``mode`` with ``tools`` enabled and ``loops`` event rounds."""
    return DebugRunRequest(
        user_message=user,
        chat_agent=AgentParams(model="chat-model"),
        event_agent=EventAgentParams(enabled_tools=tools, max_event_loops=loops),
        tool_invocation_mode=mode,
    )


async def collect(stream: AsyncIterator[OutputMessage]) -> list[Output]:
    return [message async for message in stream]


async def read_until(
    queues: RuntimeQueues, stop_types: set[str], *, count: int = 1, seconds: float = 5.0
) -> list[dict[str, Any]]:
    """Read outputs until ``count`` messages of ``stop_types`` were seen."""
    outputs: list[dict[str, Any]] = []
    seen = 0
    while seen < count:
        message = await asyncio.wait_for(queues.output.get(), timeout=seconds)
        outputs.append(message)
        if message["type"] in stop_types:
            seen += 1
    return outputs


def business(outputs: Sequence[Output]) -> list[Output]:
    return [message for message in outputs if message["type"] != "audit"]


def audits(outputs: Sequence[Output], name: str) -> list[Output]:
    return [m for m in outputs if m["type"] == "audit" and m["event"] == name]


def deltas(outputs: Sequence[Output]) -> list[str]:
    return [m["content"] for m in outputs if m["type"] == "message_delta"]
