"""Provider-compatibility cases over real HTTP: why an answer ended, tool calls with no
id, content sent as typed parts, a 5xx that the retries cannot outlast and an HTML
error page."""

from __future__ import annotations

from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.events import CutOffToolCall
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.infrastructure.conftest import Collect
from tests.infrastructure.test_chat_client_http import KEY

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _client(url: str, **options: Any) -> OpenAICompatibleChatClient:
    return OpenAICompatibleChatClient(url, KEY, **options)


def _calls(items: list[Any]) -> list[Any]:
    return [item.event for item in items if item.kind == "provider_tool_call"]


# --- why the answer ended -------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("reason", ["stop", "length", "content_filter", "tool_calls"])
async def test_the_stream_tells_why_the_provider_ended_the_answer(reason: str) -> None:
    body = ScriptedResponse.sse(_chunk({"content": "Part"}), _chunk({}, reason))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        stream = chat.stream_chat([], [], AgentParams(model="m"))
        _ = [item async for item in stream]
    assert stream.finish_reason == reason


@pytest.mark.asyncio
async def test_a_stream_with_no_finish_reason_tells_none(collect: Collect) -> None:
    body = ScriptedResponse.sse(_chunk({"content": "Part"}))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        stream = chat.stream_chat([], [], AgentParams(model="m"))
        _ = [item async for item in stream]
    assert stream.finish_reason is None


@pytest.mark.asyncio
@pytest.mark.parametrize("reason", ["length", "content_filter"])
async def test_the_call_being_written_when_the_answer_was_cut_is_marked_cut_off(
    collect: Collect, reason: str
) -> None:
    whole = {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x": 1}'}}
    cut = {"index": 1, "id": "b", "function": {"name": "f", "arguments": '{"x": '}}
    body = ScriptedResponse.sse(
        _chunk({"tool_calls": [whole]}), _chunk({"tool_calls": [cut]}), _chunk({}, reason)
    )
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        first, second = _calls(await collect(chat, tools=TOOLS))
    assert not isinstance(first, CutOffToolCall) and first.arguments == {"x": 1}
    assert isinstance(second, CutOffToolCall) and second.finish_reason == reason
    assert second.raw_arguments == '{"x": '
    assert second.model_dump() == {
        "id": "b",
        "name": "f",
        "arguments": {},
        "raw_arguments": '{"x": ',
    }


@pytest.mark.asyncio
async def test_a_call_whose_arguments_closed_before_the_cut_is_whole(collect: Collect) -> None:
    call = {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x": 1}'}}
    body = ScriptedResponse.sse(_chunk({"tool_calls": [call]}), _chunk({}, "length"))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        (only,) = _calls(await collect(chat, tools=TOOLS))
    assert not isinstance(only, CutOffToolCall)
