"""Provider faults over real HTTP: llama.cpp's ``error:`` field, a reset after a finished
answer, and a rate limit whose ``Retry-After`` the deadlines cannot wait out."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ProviderHTTPError, ProviderProtocolError
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import TRANSPORTS, Transport
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.infrastructure.conftest import Collect
from tests.infrastructure.test_chat_client_http import KEY

CONTEXT_FULL = "the request exceeds the available context size, try increasing it"
_DONE = b"data: [DONE]\n\n"


def data_event(content: str) -> bytes:
    event = {"choices": [{"index": 0, "delta": {"content": content}}]}
    return f"data: {json.dumps(event)}\n\n".encode()


def _error_field(message: str, code: int = 400) -> bytes:
    """The line llama.cpp's server writes for a failure during a stream."""
    value = {"code": code, "message": message, "type": "exceed_context_size_error"}
    return f"error: {json.dumps(value)}\n\n".encode()


def _client(
    url: str, transport: Transport = "aiohttp", **options: object
) -> OpenAICompatibleChatClient:
    return OpenAICompatibleChatClient(url, KEY, transport=transport, **options)  # type: ignore[arg-type]


# --- llama.cpp reports a failure as an ``error:`` field -----------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("chunks", "shown"),
    [
        pytest.param((_error_field(CONTEXT_FULL), _DONE), "", id="first-then-done"),
        pytest.param((_error_field(CONTEXT_FULL),), "", id="first-no-done"),
        pytest.param(
            (data_event("The answer is "), _error_field(CONTEXT_FULL, 500), _DONE),
            "The answer is ",
            id="mid-then-done",
        ),
        pytest.param(
            (data_event("The answer is "), _error_field(CONTEXT_FULL, 500)),
            "The answer is ",
            id="mid-no-done",
        ),
    ],
)
async def test_a_llamacpp_error_field_is_a_protocol_error_with_its_message(
    chunks: tuple[bytes, ...], shown: str
) -> None:
    """Wherever the field comes and whether ``[DONE]`` follows, the call fails with the
    server's own message; it never ends as a finished (empty or cut-off) answer."""
    seen: list[str] = []
    async with (
        SSETranscriptServer(ScriptedResponse(chunks=chunks)) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderProtocolError) as info:
            async for item in chat.stream_chat([], [], AgentParams(model="m"), None):
                if item.kind == "message_delta":
                    seen.append(item.content)
    assert str(info.value) == f"the provider reported an error: {CONTEXT_FULL}"
    assert info.value.failure_reason == "provider_error:protocol"
    assert "".join(seen) == shown


@pytest.mark.asyncio
async def test_a_llamacpp_error_field_masks_an_echoed_key(collect: Collect) -> None:
    message = f"bad key {KEY} for this slot"
    body = ScriptedResponse(chunks=(_error_field(message), _DONE))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        with pytest.raises(ProviderProtocolError) as info:
            await collect(chat)
    assert str(info.value) == "the provider reported an error: bad key *** for this slot"


@pytest.mark.asyncio
async def test_a_plain_text_error_field_is_reported_as_written(collect: Collect) -> None:
    body = ScriptedResponse(chunks=(data_event("Hi"), b"error: slot unavailable\n\n", _DONE))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        with pytest.raises(ProviderProtocolError) as info:
            await collect(chat)
    assert str(info.value) == "the provider reported an error: slot unavailable"


@pytest.mark.asyncio
async def test_a_turn_ended_by_an_error_field_fails_as_a_provider_protocol_error() -> None:
    """Through the runtime: the turn fails with the server's message, not ``done``."""
    body = ScriptedResponse(chunks=(_error_field(CONTEXT_FULL), _DONE))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        runtime = DebugRuntime(chat)
        request = DebugRunRequest(
            session_id="s", user_message="hello", chat_agent=AgentParams(model="m")
        )
        outputs = [output async for output in runtime.run(request)]
        await runtime.aclose()
    types = [output["type"] for output in outputs]
    assert "done" not in types
    error = next(output for output in outputs if output["type"] == "error")
    assert error["failure_reason"] == "provider_error:protocol"
    assert CONTEXT_FULL in error["message"]


# --- a reset after the finished answer ---------------------------------------------------

_USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
_FINISHED_ANSWER = (
    data_event("Complete answer."),
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    f"data: {json.dumps({'choices': [], 'usage': _USAGE})}\n\n".encode(),
)


class ResetAfter:
    """Streams ``chunks`` then resets the TCP connection (``SO_LINGER`` 0: an RST) instead
    of ending the body; ``chunked`` frames the body, else it runs until the close."""

    def __init__(self, chunks: tuple[bytes, ...], *, chunked: bool) -> None:
        self._chunks = chunks
        self._chunked = chunked

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        framing = b"transfer-encoding: chunked" if self._chunked else b"connection: close"
        writer.write(framing + b"\r\n\r\n")
        for data in self._chunks:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if self._chunked else data)
            await writer.drain()
        await asyncio.sleep(0.2)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "until-close"])
async def test_a_reset_after_the_finished_answer_does_not_fail_the_call(
    transport: Transport, chunked: bool, collect: Collect
) -> None:
    """``finish_reason`` and usage arrived, then an RST instead of ``[DONE]``: the answer
    is whole, so the call ends as finished, with its text and usage, on both transports."""
    async with (
        ResetAfter(_FINISHED_ANSWER, chunked=chunked) as url,
        _client(url, transport, max_retries=0) as chat,
    ):
        items = await collect(chat)
    assert "".join(i.content for i in items if i.kind == "message_delta") == "Complete answer."
    usage = [item.usage for item in items if item.kind == "usage"]
    assert usage and usage[0] is not None and usage[0].total_tokens == 18


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_reset_before_finish_reason_still_fails_the_call(
    transport: Transport, collect: Collect
) -> None:
    """The same reset one chunk earlier (no ``finish_reason`` yet) is a broken stream."""
    async with (
        ResetAfter(_FINISHED_ANSWER[:1], chunked=True) as url,
        _client(url, transport, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderProtocolError) as info:
            await collect(chat)
    assert info.value.failure_reason == "provider_error:protocol"


# --- a rate limit whose Retry-After the deadline cannot wait out --------------------------

_RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests"}}


def _limited(seconds: str) -> ScriptedResponse:
    return ScriptedResponse.error(429, _RATE_LIMITED, headers={"Retry-After": seconds})


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "deadlines",
    [{"timeout": 2.0}, {"timeout": 60.0, "total_timeout": 2.0}],
    ids=["idle", "total"],
)
async def test_a_429_asking_for_a_wait_past_the_deadline_is_reported_as_the_429(
    deadlines: dict[str, float],
) -> None:
    """``Retry-After: 30`` with 2 s left: the SDK does not wait (it would only end in a
    timeout); the call fails at once with the provider's 429 and its message."""
    async with (
        SSETranscriptServer(*[_limited("30")] * 3) as server,
        _client(server.base_url, "aiohttp", max_retries=2, **deadlines) as chat,
    ):
        stream = chat.stream_chat([], [], AgentParams(model="m"))
        with pytest.raises(ProviderHTTPError) as info:
            _ = [item async for item in stream]
        assert server.request_count == 1
    assert info.value.status == 429
    assert str(info.value) == "provider returned HTTP 429: Rate limit reached"
    assert info.value.failure_reason == "provider_error:http_429"
    assert stream.timing.attempts == 1


@pytest.mark.asyncio
async def test_a_429_whose_retry_after_fits_is_still_waited_out(collect: Collect) -> None:
    answer = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "After retry."}, "finish_reason": "stop"}]}
    )
    async with (
        SSETranscriptServer(_limited("1"), answer) as server,
        _client(server.base_url, max_retries=2, timeout=10.0) as chat,
    ):
        items = await collect(chat)
        assert server.request_count == 2
    assert [item.content for item in items if item.kind == "message_delta"] == ["After retry."]
