"""Recorded streams of each server family, replayed by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import Transport
from agent_lab.testing.sse_server import Pause, ScriptedResponse, SSETranscriptServer

Transcript = Callable[[str, str], ScriptedResponse]
Collect = Callable[..., Awaitable[list[StreamItem]]]


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": properties},
        },
    }


def visible(items: list[StreamItem]) -> str:
    return "".join(item.content for item in items if item.kind == "message_delta")


def calls(
    items: list[StreamItem], kind: str = "provider_tool_call"
) -> list[tuple[str, str, dict[str, Any], str]]:
    return [
        (
            item.event.id,
            item.event.name,
            item.event.arguments,
            item.event.raw_arguments,
        )
        for item in items
        if item.kind == kind and item.event is not None
    ]


def usages(items: list[StreamItem]) -> list[TokenUsage | None]:
    return [item.usage for item in items if item.kind == "usage"]


async def replay(
    response: ScriptedResponse, collect: Collect, **kwargs: Any
) -> tuple[list[StreamItem], SSETranscriptServer]:
    async with (
        SSETranscriptServer(response) as server,
        OpenAICompatibleChatClient(server.base_url, "sk-test-key", max_retries=0) as client,
    ):
        items = await collect(client, **kwargs)
    return items, server


@pytest.mark.asyncio
async def test_openai_text_with_cached_usage(transcript: Transcript, collect: Collect) -> None:
    items, server = await replay(transcript("openai", "text_cached_usage"), collect)
    assert visible(items) == "The weather in Zürich is 18\u00a0°C and sunny."
    assert usages(items) == [
        TokenUsage(prompt_tokens=1234, completion_tokens=11, total_tokens=1245, cached_tokens=1024)
    ]
    assert [item.kind for item in items].count("raw_chunk") == 13
    assert items[0].kind == "raw_chunk"
    assert items[-1].kind == "usage"
    assert server.request_count == 1


@pytest.mark.asyncio
async def test_openai_parallel_calls_with_alias_round_trip(
    transcript: Transcript, collect: Collect
) -> None:
    tools = [tool("get_weather"), tool("calendar.schedule.create")]
    items, server = await replay(transcript("openai", "parallel_tool_calls"), collect, tools=tools)
    sent = server.requests[0].json()
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "get_weather",
        "calendar__schedule__create",
    ]
    assert calls(items) == [
        (
            "call_Wq3LrX0aPz8sT1vQ",
            "get_weather",
            {"city": "Zürich", "unit": "c"},
            '{"city":"Zürich","unit":"c"}',
        ),
        (
            "call_Hk9mNc2YbE5uJ7dR",
            "calendar.schedule.create",
            {"title": "Dentist", "start_at": "2025-03-04T09:30:00", "timezone": "Europe/Zurich"},
            '{"title":"Dentist","start_at":"2025-03-04T09:30:00","timezone":"Europe/Zurich"}',
        ),
    ]
    assert visible(items) == ""
    # The calls are emitted when finish_reason arrives, before the usage chunk.
    kinds = [item.kind for item in items]
    assert kinds.index("provider_tool_call") < len(kinds) - 2
    assert usages(items)[0] == TokenUsage(prompt_tokens=402, completion_tokens=61, total_tokens=463)


@pytest.mark.asyncio
async def test_openai_text_events_without_tools(transcript: Transcript, collect: Collect) -> None:
    items, _ = await replay(transcript("openai", "text_events"), collect)
    assert visible(items) == "Let me book that for you.  I'll confirm shortly. "
    events = calls(items, "text_event")
    assert [name for _, name, _, _ in events] == [
        "calendar.schedule.create",
        "handoff_note",
        "session.terminate",
    ]
    assert all(args == {} and raw == "{}" for _, _, args, raw in events)
    assert len({event_id for event_id, _, _, _ in events}) == 3
    assert not calls(items)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11])
async def test_text_events_survive_any_write_size(
    transcript: Transcript, collect: Collect, size: int
) -> None:
    items, _ = await replay(transcript("openai", "text_events").split(size), collect)
    assert visible(items) == "Let me book that for you.  I'll confirm shortly. "
    assert [name for _, name, _, _ in calls(items, "text_event")] == [
        "calendar.schedule.create",
        "handoff_note",
        "session.terminate",
    ]


@pytest.mark.asyncio
async def test_with_tools_event_markers_are_plain_visible_text(
    transcript: Transcript, collect: Collect
) -> None:
    items, _ = await replay(
        transcript("openai", "text_events"), collect, tools=[tool("handoff_note")]
    )
    assert "<event>calendar.schedule.create, handoff_note</event>" in visible(items)
    assert not calls(items, "text_event")


@pytest.mark.asyncio
async def test_vllm_parameterless_calls_and_hidden_reasoning(
    transcript: Transcript, collect: Collect
) -> None:
    tools = [tool("get_weather"), tool("list_devices"), tool("get_time")]
    items, _ = await replay(transcript("vllm", "tool_calls_parameterless"), collect, tools=tools)
    assert calls(items) == [
        ("chatcmpl-tool-0a1b2c3d4e5f", "get_weather", {"city": "Oslo"}, '{"city": "Oslo"}'),
        ("chatcmpl-tool-1b2c3d4e5f6a", "list_devices", {}, "{}"),
        ("chatcmpl-tool-2c3d4e5f6a7b", "get_time", {}, "{}"),
    ]
    assert visible(items) == ""
    raw = [item.raw_chunk for item in items if item.kind == "raw_chunk"]
    assert any(
        chunk and chunk["choices"] and "reasoning_content" in chunk["choices"][0]["delta"]
        for chunk in raw
    )
    assert usages(items) == [TokenUsage(prompt_tokens=512, completion_tokens=62, total_tokens=574)]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("family", "name", "message"),
    [
        ("vllm", "mid_stream_error", "longer than the maximum model length of 32768"),
        ("llamacpp", "mid_stream_error", "Context size has been exceeded."),
        ("nim", "object_error", "Internal server error: the model worker crashed"),
    ],
)
async def test_error_object_mid_stream_raises_with_provider_message(
    transcript: Transcript, family: str, name: str, message: str
) -> None:
    seen: list[StreamItem] = []
    async with (
        SSETranscriptServer(transcript(family, name)) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(ProviderProtocolError, match="the provider reported an error") as info:
            async for item in client.stream_chat([], [], AgentParams(model="m"), None):
                seen.append(item)
    assert message in str(info.value)
    assert visible(seen) in {"Sure", "Working", "Checking"}


@pytest.mark.asyncio
async def test_ollama_parallel_calls_sharing_index_zero(
    transcript: Transcript, collect: Collect
) -> None:
    items, _ = await replay(
        transcript("ollama", "parallel_same_index"), collect, tools=[tool("get_weather")]
    )
    assert calls(items) == [
        ("call_4vq1n8ke", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call_r7d2xw0m", "get_weather", {"city": "Berlin"}, '{"city":"Berlin"}'),
    ]
    assert usages(items) == [TokenUsage(prompt_tokens=187, completion_tokens=48, total_tokens=235)]


@pytest.mark.asyncio
async def test_ollama_reasoning_is_not_visible(transcript: Transcript, collect: Collect) -> None:
    items, _ = await replay(transcript("ollama", "text_reasoning"), collect)
    assert visible(items) == "Hello! How can I help?"
    assert usages(items) == [TokenUsage(prompt_tokens=26, completion_tokens=9, total_tokens=35)]


@pytest.mark.asyncio
async def test_llamacpp_repeated_name_and_legacy_function_call(
    transcript: Transcript, collect: Collect
) -> None:
    items, server = await replay(
        transcript("llamacpp", "repeated_name_legacy"),
        collect,
        tools=[tool("device.volume.adjust")],
    )
    assert server.requests[0].json()["tools"][0]["function"]["name"] == "device__volume__adjust"
    assert calls(items) == [
        ("Xk2pQ9vLm3Rt", "device.volume.adjust", {"level": 30}, '{"level": 30}')
    ]
    assert usages(items) == [TokenUsage(prompt_tokens=233, completion_tokens=21, total_tokens=254)]


@pytest.mark.asyncio
async def test_llamacpp_without_usage_yields_no_usage(
    transcript: Transcript, collect: Collect
) -> None:
    items, _ = await replay(transcript("llamacpp", "text_no_usage"), collect)
    assert visible(items) == "Sure, here you go."
    assert usages(items) == []


@pytest.mark.asyncio
async def test_llamacpp_calls_without_ids_get_unique_generated_ids(
    transcript: Transcript, collect: Collect
) -> None:
    tools = [tool("get_weather"), tool("get_time")]
    async with (
        SSETranscriptServer(
            transcript("llamacpp", "calls_without_ids"), transcript("llamacpp", "calls_without_ids")
        ) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        first = calls(await collect(client, tools=tools))
        second = calls(await collect(client, tools=tools))
    assert [(name, args, raw) for _, name, args, raw in first] == [
        ("get_weather", {"city": "Rome"}, '{"city": "Rome"}'),
        ("get_time", {}, "{}"),
    ]
    ids = [call_id for call_id, *_ in first + second]
    assert all(call_id.startswith("call_") for call_id in ids)
    assert len(set(ids)) == 4


@pytest.mark.asyncio
async def test_recorded_llama_cpp_python_forced_call_is_one_call(
    transcript: Transcript, collect: Collect
) -> None:
    choice = {"type": "function", "function": {"name": "web_search"}}
    items, server = await replay(
        transcript("llamacpp", "python_forced_tool_recorded"),
        collect,
        tools=[tool("web_search", query={"type": "string"})],
        tool_choice=choice,
    )
    assert server.requests[0].json()["tool_choice"] == choice
    assert calls(items) == [
        (
            "call__0_web_search_cmpl-d3576183-3fbd-4725-9472-fd79febfc1ac",
            "web_search",
            {"query": "Paris, France"},
            '{"query": "Paris, France" }',
        )
    ]
    assert usages(items) == []


@pytest.mark.asyncio
async def test_recorded_llama_cpp_python_text(transcript: Transcript, collect: Collect) -> None:
    items, _ = await replay(transcript("llamacpp", "python_text_recorded"), collect)
    assert visible(items) == "Le Grand Paris is the capital of France."
    assert usages(items) == []


@pytest.mark.asyncio
async def test_deepseek_keepalive_comments_reasoning_and_cache_hits(
    transcript: Transcript, collect: Collect
) -> None:
    items, _ = await replay(transcript("deepseek", "reasoning_keepalive"), collect)
    assert visible(items) == "2 + 2 = 4."
    assert usages(items) == [
        TokenUsage(prompt_tokens=96, completion_tokens=41, total_tokens=137, cached_tokens=64)
    ]
    assert sum(item.kind == "raw_chunk" for item in items) == 8


@pytest.mark.asyncio
async def test_nim_crlf_repeated_names_integer_id_and_object_arguments(
    transcript: Transcript, collect: Collect
) -> None:
    tools = [tool("get_weather"), tool("device.volume.adjust")]
    items, _ = await replay(transcript("nim", "tool_calls_crlf"), collect, tools=tools)
    assert calls(items) == [
        ("chatcmpl-tool-9a8b7c6d", "get_weather", {"city": "Lima"}, '{"city": "Lima"}'),
        ("42", "device.volume.adjust", {"level": 30}, '{"level":30}'),
    ]
    assert usages(items) == [TokenUsage(prompt_tokens=301, completion_tokens=39, total_tokens=340)]


@pytest.mark.asyncio
async def test_truncated_stream_raises_instead_of_completing(
    transcript: Transcript, collect: Collect
) -> None:
    with pytest.raises(ProviderProtocolError):
        await replay(transcript("openai", "truncated"), collect)


@pytest.mark.asyncio
async def test_eof_without_finish_reason_or_done_raises(collect: Collect) -> None:
    response = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, done=False
    )
    with pytest.raises(ProviderProtocolError, match="no finish_reason and no \\[DONE\\]"):
        await replay(response, collect)


@pytest.mark.asyncio
async def test_connection_dropped_mid_stream_raises_protocol_error(collect: Collect) -> None:
    response = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, done=False, abort=True
    )
    with pytest.raises(ProviderProtocolError, match="broke off the stream"):
        await replay(response, collect)


@pytest.mark.asyncio
@pytest.mark.parametrize("ending", ["dropped", "malformed"])
async def test_a_stream_that_breaks_off_tells_its_time_and_the_usage_reported(
    ending: str,
) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}
    events: list[dict[str, Any] | bytes] = [
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"choices": [], "usage": usage},
    ]
    if ending == "malformed":
        events.append(b'{"choices": [')
    response = ScriptedResponse.sse(*events, done=False, abort=ending == "dropped")
    items: list[StreamItem] = []
    async with (
        SSETranscriptServer(response) as server,
        OpenAICompatibleChatClient(server.base_url, "sk-test-key", max_retries=0) as client,
    ):
        stream = client.stream_chat(
            [ChatMessage(role="user", content="Hi")], [], AgentParams(model="m")
        )
        with pytest.raises(ProviderProtocolError):
            async for item in stream:
                items.append(item)

    assert visible(items) == "Hi" and usages(items) == []  # no usage item: it never ended
    timing = stream.timing
    assert timing.first_chunk_ms is not None and timing.total_ms is not None
    assert stream.usage == TokenUsage(prompt_tokens=12, completion_tokens=2, total_tokens=14)


@pytest.mark.asyncio
async def test_keepalive_comments_and_crlf_between_slow_events(collect: Collect) -> None:
    response = ScriptedResponse(
        chunks=(
            b": keep-alive\r\n\r\n",
            Pause(0.05),
            b": keep-alive\r\n\r\n",
            b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\r\n\r',
            Pause(0.05),
            b'\ndata: {"choices":[{"index":0,"delta":{"content":"lo"},'
            b'"finish_reason":"stop"}]}\r\n\r\n',
            b"data: [DONE]\r\n\r\n",
        )
    )
    items, _ = await replay(response, collect)
    assert visible(items) == "Hello"
    assert [item.kind for item in items] == [
        "raw_chunk",
        "message_delta",
        "raw_chunk",
        "message_delta",
    ]


@pytest.mark.asyncio
async def test_raw_chunks_are_plain_dicts_of_what_was_sent(collect: Collect) -> None:
    chunk = {
        "id": "x",
        "choices": [
            {"index": 0, "delta": {"content": "a", "extra": [1, None]}, "finish_reason": "stop"}
        ],
        "vendor_field": {"nested": True},
    }
    items, _ = await replay(ScriptedResponse.sse(chunk), collect)
    assert items[0].raw_chunk == chunk
    assert type(items[0].raw_chunk) is dict


@pytest.mark.asyncio
async def test_concurrent_streams_on_one_client_keep_their_own_state(collect: Collect) -> None:
    def delta(fragment: dict[str, Any]) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **fragment}]}}]}

    def answer(n: int) -> ScriptedResponse:
        return ScriptedResponse.sse(
            delta({"id": f"call_{n}", "function": {"name": "a__b", "arguments": ""}}),
            delta({"function": {"arguments": f'{{"n": {n}'}}),
            delta({"function": {"arguments": "}"}}),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            pause=0.01,
        )

    async with (
        SSETranscriptServer(*(answer(n) for n in range(6))) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        results = await asyncio.gather(*(collect(client, tools=[tool("a.b")]) for _ in range(6)))
    found = [calls(items) for items in results]
    assert all(len(stream_calls) == 1 for stream_calls in found)
    assert sorted((c[0][0], c[0][1], c[0][2]["n"]) for c in found) == [
        (f"call_{n}", "a.b", n) for n in range(6)
    ]
    assert server.request_count == 6


@pytest.mark.asyncio
async def test_items_read_through_the_original_attribute_names(
    transcript: Transcript, collect: Collect
) -> None:
    """Code written against the original API reads raw_chunk, content, usage and event."""
    tools = [tool("get_weather"), tool("calendar.schedule.create")]
    items, _ = await replay(transcript("openai", "parallel_tool_calls"), collect, tools=tools)
    raw = [item.raw_chunk for item in items if item.kind == "raw_chunk"]
    assert raw and all(isinstance(chunk, dict) and "choices" in chunk for chunk in raw)
    events = [item.event for item in items if item.kind == "provider_tool_call"]
    assert [event.name for event in events if event is not None] == [
        "get_weather",
        "calendar.schedule.create",
    ]
    assert [item.usage for item in items if item.kind == "usage"][0] is not None
    text_items, _ = await replay(transcript("openai", "text_cached_usage"), collect)
    assert "".join(item.content for item in text_items if item.kind == "message_delta")
    assert all(item.event is None for item in text_items)
    legacy = StreamItem.event(events[0]) if events[0] is not None else None
    assert legacy is not None and legacy.kind == "event" and legacy.event is events[0]


def _answered(text: str) -> list[dict[str, Any]]:
    return [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_done_ends_the_answer_though_the_server_keeps_the_connection_open(
    collect: Collect, transport: Transport
) -> None:
    """A gateway that holds the connection open after ``[DONE]``: the answer is over
    then, not when the idle deadline (5 s here) runs out."""
    answer = ScriptedResponse.sse(*_answered("Done but open."))
    response = ScriptedResponse(chunks=(*answer.chunks, Pause(60.0)))
    async with (
        SSETranscriptServer(response) as server,
        OpenAICompatibleChatClient(
            server.base_url, "k", max_retries=0, timeout=5.0, transport=transport
        ) as client,
    ):
        items = await collect(client)

    assert visible(items) == "Done but open."
    assert usages(items) == [TokenUsage(prompt_tokens=5, completion_tokens=2, total_tokens=7)]


@pytest.mark.asyncio
async def test_what_follows_done_is_not_read_as_part_of_the_answer(collect: Collect) -> None:
    """Data after ``[DONE]`` (a trailer, junk from a proxy) neither fails nor adds."""
    answer = ScriptedResponse.sse(*_answered("Extra after done."))
    response = ScriptedResponse(
        chunks=(*answer.chunks, b'data: {"garbage": true\n\n', b'data: {"choices": []}\n\n')
    )
    items, _ = await replay(response, collect)

    assert visible(items) == "Extra after done."
    assert [item.kind for item in items].count("raw_chunk") == 3
