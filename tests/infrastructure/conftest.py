"""Shared helpers for the chat client tests: recorded transcripts and stream collection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import ScriptedResponse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sse"

Collect = Callable[..., Awaitable[list[StreamItem]]]


@pytest.fixture
def transcript() -> Callable[[str, str], ScriptedResponse]:
    """Loads ``tests/fixtures/sse/<family>/<name>.json`` as a scripted response."""

    def load(family: str, name: str) -> ScriptedResponse:
        return ScriptedResponse.from_fixture(FIXTURES / family / f"{name}.json")

    return load


@pytest.fixture
def collect() -> Collect:
    """Drains one ``stream_chat`` call into a list."""

    async def run(
        client: OpenAICompatibleChatClient,
        *,
        messages: list[ChatMessage] | None = None,
        tools: list[dict[str, Any]] | None = None,
        params: AgentParams | None = None,
        tool_choice: dict[str, Any] | None = None,
    ) -> list[StreamItem]:
        stream = client.stream_chat(
            messages if messages is not None else [ChatMessage(role="user", content="hi")],
            tools if tools is not None else [],
            params or AgentParams(model="test-model"),
            tool_choice,
        )
        return [item async for item in stream]

    return run
