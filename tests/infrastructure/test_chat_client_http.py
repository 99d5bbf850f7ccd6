"""The request side over real HTTP: body, headers, retries, errors, timeouts and secrets."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import (
    AgentLabError,
    ConfigError,
    ProviderConnectionError,
    ProviderDeadlineExceeded,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTimeout,
    UsageError,
)
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import Pause, ScriptedResponse, SSETranscriptServer

Collect = Callable[..., Awaitable[list[StreamItem]]]

KEY = "sk-test-9f8e7d6c5b4a39281706"
FAST_RETRY = {"retry-after-ms": "20"}


def ok() -> ScriptedResponse:
    return ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    )


def weather_tool(name: str = "get_weather") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }


def full_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def assert_mapped(exc: BaseException) -> None:
    """Our error, chained to the library exception it replaces."""
    assert isinstance(exc, AgentLabError)
    assert isinstance(exc.__cause__, openai.OpenAIError | httpx.HTTPError)


# --- request body and headers ------------------------------------------------------------


@pytest.mark.asyncio
async def test_request_body_carries_every_field(collect: Collect) -> None:
    params = AgentParams(
        model="my-model",
        temperature=0.3,
        max_tokens=128,
        top_p=0.9,
        extra_body={"seed": 7, "chat_template_kwargs": {"enable_thinking": False}, "stream": False},
    )
    choice = {"type": "function", "function": {"name": "calendar.schedule.create"}}
    tools = [weather_tool(), weather_tool("calendar.schedule.create")]
    async with (
        SSETranscriptServer(ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        await collect(client, tools=tools, params=params, tool_choice=choice)
    (request,) = server.requests
    body = request.json()
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert body["model"] == "my-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 128
    assert body["top_p"] == 0.9
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert [tool["function"]["name"] for tool in body["tools"]] == [
        "get_weather",
        "calendar__schedule__create",
    ]
    assert body["tools"][1]["function"]["parameters"] == tools[1]["function"]["parameters"]
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "calendar__schedule__create"},
    }
    assert body["seed"] == 7
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    # The caller's dicts are not modified by aliasing.
    assert tools[1]["function"]["name"] == "calendar.schedule.create"
    assert choice["function"] == {"name": "calendar.schedule.create"}


@pytest.mark.asyncio
async def test_optional_fields_are_left_out(collect: Collect) -> None:
    async with (
        SSETranscriptServer(ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        await collect(client, params=AgentParams(model="m"))
    body = server.requests[0].json()
    assert not {"max_tokens", "top_p", "tools", "tool_choice"} & body.keys()


@pytest.mark.asyncio
async def test_transcript_is_converted_with_aliases(collect: Collect) -> None:
    call = ToolCallEvent(
        id="call_1",
        name="calendar.schedule.create",
        arguments={"title": "x"},
        raw_arguments='{"title": "x"}',
    )
    messages = [
        ChatMessage(role="system", content="sys"),
        ChatMessage(role="user", content="hello"),
        ChatMessage(role="assistant", content="", tool_calls=[call]),
        ChatMessage(
            role="tool",
            content='{"ok":true}',
            name="calendar.schedule.create",
            tool_call_id="call_1",
        ),
        ChatMessage(role="user", name="event_agent", content="EventAgent results:\n{}"),
    ]
    async with (
        SSETranscriptServer(ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        await collect(client, messages=messages, tools=[weather_tool("calendar.schedule.create")])
    assert server.requests[0].json()["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "calendar__schedule__create",
                        "arguments": '{"title": "x"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": '{"ok":true}',
            "name": "calendar__schedule__create",
        },
        {"role": "user", "content": "EventAgent results:\n{}", "name": "event_agent"},
    ]


@pytest.mark.asyncio
async def test_authorization_header_is_sent_but_never_yielded(collect: Collect) -> None:
    echo = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": f"your header was Bearer {KEY}"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "debug": {"key": KEY}},
    )
    async with (
        SSETranscriptServer(echo) as server,
        OpenAICompatibleChatClient(
            server.base_url, KEY, default_headers={"X-Team": "lab"}
        ) as client,
    ):
        items = await collect(client)
    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-team"] == "lab"
    assert KEY not in repr(items)
    assert items[0].raw_chunk is not None
    assert items[0].raw_chunk["choices"][0]["delta"]["content"] == "your header was Bearer ***"
    assert items[2].raw_chunk is not None and items[2].raw_chunk["debug"] == {"key": "***"}


@pytest.mark.asyncio
async def test_without_api_key_no_authorization_is_sent(
    collect: Collect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    async with (
        SSETranscriptServer(ok()) as server,
        OpenAICompatibleChatClient(server.base_url) as client,
    ):
        await collect(client)
    assert "authorization" not in server.requests[0].headers


@pytest.mark.asyncio
async def test_custom_authorization_header_is_kept_and_scrubbed(collect: Collect) -> None:
    secret = "Token custom-credential-123"
    failing = ScriptedResponse.error(403, {"error": {"message": f"denied for {secret}"}})
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(
            server.base_url, default_headers={"Authorization": secret}, max_retries=0
        ) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(client)
    assert server.requests[0].headers["authorization"] == secret
    assert "custom-credential-123" not in full_text(info.value)


# --- retries -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_503_is_retried_then_succeeds(collect: Collect) -> None:
    busy = ScriptedResponse.error(503, {"error": {"message": "busy"}}, headers=FAST_RETRY)
    async with (
        SSETranscriptServer(busy, busy, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=2) as client,
    ):
        items = await collect(client)
    assert server.request_count == 3
    assert "".join(item.content for item in items if item.kind == "message_delta") == "ok"


@pytest.mark.asyncio
async def test_503_without_retry_after_backs_off_and_succeeds(collect: Collect) -> None:
    busy = ScriptedResponse.error(503, "Service Unavailable")
    async with (
        SSETranscriptServer(busy, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=1) as client,
    ):
        await collect(client)
    first, second = server.requests
    assert server.request_count == 2
    assert second.received_at - first.received_at >= 0.2  # exponential backoff with jitter


@pytest.mark.asyncio
async def test_retry_after_is_honoured(collect: Collect) -> None:
    limited = ScriptedResponse.error(
        429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "1"}
    )
    async with (
        SSETranscriptServer(limited, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=1) as client,
    ):
        await collect(client)
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.95


@pytest.mark.asyncio
async def test_retries_exhausted_raise_http_error(collect: Collect) -> None:
    busy = ScriptedResponse.error(502, {"error": {"message": "bad gateway"}}, headers=FAST_RETRY)
    async with (
        SSETranscriptServer(busy, busy, busy, busy) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=2) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(client)
    assert server.request_count == 3
    assert info.value.status == 502
    assert info.value.provider_message == "bad gateway"
    assert_mapped(info.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(collect: Collect, status: int) -> None:
    failing = ScriptedResponse.error(
        status, {"error": {"message": f"provider says {status}", "type": "invalid_request_error"}}
    )
    async with (
        SSETranscriptServer(failing, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=2) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(client)
    assert server.request_count == 1
    assert info.value.status == status
    assert f"provider says {status}" in str(info.value)
    assert_mapped(info.value)


@pytest.mark.asyncio
async def test_401_message_has_provider_text_but_never_the_key(collect: Collect) -> None:
    failing = ScriptedResponse.error(
        401,
        {
            "error": {
                "message": f"Incorrect API key provided: {KEY}. Check your key.",
                "code": "invalid_api_key",
            }
        },
    )
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=2) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(client)
    assert server.request_count == 1
    assert info.value.status == 401
    assert info.value.provider_message == "Incorrect API key provided: ***. Check your key."
    assert KEY not in str(info.value)
    assert KEY not in full_text(info.value)
    assert KEY not in repr(info.value.__cause__)


@pytest.mark.asyncio
async def test_key_echoed_in_a_plain_text_error_body_is_scrubbed(collect: Collect) -> None:
    failing = ScriptedResponse.error(
        500, f"proxy error: upstream rejected Authorization: Bearer {KEY}"
    )
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=0) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(client)
    assert info.value.provider_message == "proxy error: upstream rejected Authorization: Bearer ***"
    assert KEY not in full_text(info.value)


@pytest.mark.asyncio
async def test_detail_style_error_bodies(collect: Collect) -> None:
    failing = ScriptedResponse.error(404, {"detail": "Model 'nope' not found"})
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(ProviderHTTPError, match="Model 'nope' not found"):
            await collect(client)


@pytest.mark.asyncio
async def test_key_never_reaches_the_logs(
    collect: Collect, caplog: pytest.LogCaptureFixture
) -> None:
    failing = ScriptedResponse.error(500, {"error": {"message": f"echo {KEY}"}}, headers=FAST_RETRY)
    caplog.set_level(logging.DEBUG)
    async with (
        SSETranscriptServer(failing, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=1) as client,
    ):
        await collect(client)
    assert caplog.records
    assert KEY not in caplog.text


# --- timeouts, connection failures, odd answers -------------------------------------------


@pytest.mark.asyncio
async def test_no_answer_within_timeout_raises_provider_timeout(collect: Collect) -> None:
    slow = ScriptedResponse(delay=2.0, chunks=ok().chunks)
    async with (
        SSETranscriptServer(slow) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, timeout=0.2, max_retries=0) as client,
    ):
        with pytest.raises(ProviderDeadlineExceeded, match="no content for 0.2 s") as info:
            await collect(client)
    assert isinstance(info.value, ProviderTimeout)
    assert info.value.deadline == "idle"
    assert info.value.elapsed_s >= 0.2
    assert f"the call ran {info.value.elapsed_s:.1f} s" in str(info.value)


@pytest.mark.asyncio
async def test_stream_that_stalls_mid_way_raises_provider_timeout(collect: Collect) -> None:
    stalled = ScriptedResponse(
        chunks=(b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n', Pause(2.0))
    )
    async with (
        SSETranscriptServer(stalled) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, timeout=0.2, max_retries=0) as client,
    ):
        with pytest.raises(ProviderDeadlineExceeded) as info:
            await collect(client)
    assert info.value.deadline == "idle"


@pytest.mark.asyncio
async def test_unreachable_endpoint_raises_connection_error_naming_the_url(
    collect: Collect,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with OpenAICompatibleChatClient(url, KEY, max_retries=0) as client:
        with pytest.raises(ProviderConnectionError) as info:
            await collect(client)
    assert f"{url}/chat/completions" in str(info.value)
    assert KEY not in full_text(info.value)
    assert_mapped(info.value)


@pytest.mark.asyncio
async def test_json_answer_instead_of_a_stream_is_a_protocol_error(collect: Collect) -> None:
    plain = ScriptedResponse(
        status=200,
        body=b'{"object":"error","message":"streaming is disabled"}',
        content_type="application/json",
    )
    async with (
        SSETranscriptServer(plain) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(ProviderProtocolError, match="streaming is disabled"):
            await collect(client)


# --- transcript checks and lifecycle -------------------------------------------------------


@pytest.mark.asyncio
async def test_invalid_transcript_raises_before_any_request(collect: Collect) -> None:
    orphan = [ChatMessage(role="tool", content="{}", tool_call_id="nope", name="x")]
    async with (
        SSETranscriptServer(ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        with pytest.raises(ValueError, match="'nope'"):
            await collect(client, messages=orphan)
    assert server.request_count == 0


@pytest.mark.asyncio
async def test_injected_http_client_is_used_and_left_open(collect: Collect) -> None:
    sent: list[str] = []

    async def record(request: httpx.Request) -> None:
        sent.append(str(request.url))

    async with (
        SSETranscriptServer(ok()) as server,
        httpx.AsyncClient(event_hooks={"request": [record]}) as http_client,
    ):
        client = OpenAICompatibleChatClient(server.base_url, KEY, http_client=http_client)
        await collect(client)
        await client.aclose()
        await client.aclose()
        assert not http_client.is_closed
        with pytest.raises(UsageError, match="closed"):
            await collect(client)
    assert sent == [f"{server.base_url}/chat/completions"]
    assert server.request_count == 1


@pytest.mark.asyncio
async def test_breaking_out_of_the_stream_closes_it_cleanly(collect: Collect) -> None:
    long = ScriptedResponse.sse(
        *({"choices": [{"index": 0, "delta": {"content": str(n)}}]} for n in range(50)),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    async with (
        SSETranscriptServer(long, ok()) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        stream = client.stream_chat(
            [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
        )
        async for item in stream:
            if item.kind == "message_delta":
                break
        await stream.aclose()  # type: ignore[attr-defined]
        assert [item.content for item in await collect(client) if item.content] == ["ok"]


def test_validate_tool_transcript_ignores_self() -> None:
    class Other:
        pass

    good = [
        ChatMessage(role="user", content="q"),
        ChatMessage(
            role="assistant", tool_calls=[ToolCallEvent(id="a", name="t", raw_arguments="{}")]
        ),
        ChatMessage(role="tool", content="{}", tool_call_id="a", name="t"),
    ]
    OpenAICompatibleChatClient._validate_tool_transcript(Other(), good)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unanswered"):
        OpenAICompatibleChatClient._validate_tool_transcript(Other(), good[:2])  # type: ignore[arg-type]


def test_repr_does_not_show_the_key() -> None:
    client = OpenAICompatibleChatClient("http://127.0.0.1:9/v1", KEY)
    assert KEY not in repr(client)
    assert client.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("url", ["not a url", "ftp://host/v1", "http://[::1", "http:///v1"])
def test_invalid_base_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        OpenAICompatibleChatClient(url, KEY)
