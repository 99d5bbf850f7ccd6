"""Provider faults over real HTTP: llama.cpp's ``error:`` field, a reset after a finished
answer, and a rate limit whose ``Retry-After`` the deadlines cannot wait out."""

from __future__ import annotations

import json

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import TRANSPORTS, Transport
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.infrastructure.conftest import Collect
from tests.infrastructure.test_chat_client_http import KEY

CONTEXT_FULL = "the request exceeds the available context size, try increasing it"
_DONE = b"data: [DONE]\n\n"


def _data(content: str) -> bytes:
    event = {"choices": [{"index": 0, "delta": {"content": content}}]}
    return f"data: {json.dumps(event)}\n\n".encode()


def _error_field(message: str, code: int = 400) -> bytes:
    """The line llama.cpp's server writes for a failure during a stream."""
    value = {"code": code, "message": message, "type": "exceed_context_size_error"}
    return f"error: {json.dumps(value)}\n\n".encode()


def _client(url: str, transport: Transport = "aiohttp", **options: object) -> OpenAICompatibleChatClient:
    return OpenAICompatibleChatClient(url, KEY, transport=transport, **options)  # type: ignore[arg-type]


# --- llama.cpp reports a failure as an ``error:`` field -----------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("chunks", "shown"),
    [
        pytest.param((_error_field(CONTEXT_FULL), _DONE), "", id="first-then-done"),
        pytest.param((_error_field(CONTEXT_FULL),), "", id="first-no-done"),
        pytest.param(
            (_data("The answer is "), _error_field(CONTEXT_FULL, 500), _DONE),
            "The answer is ",
            id="mid-then-done",
        ),
        pytest.param(
            (_data("The answer is "), _error_field(CONTEXT_FULL, 500)),
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
    body = ScriptedResponse(chunks=(_data("Hi"), b"error: slot unavailable\n\n", _DONE))
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


_ = TRANSPORTS
