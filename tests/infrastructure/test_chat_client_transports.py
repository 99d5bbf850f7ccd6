"""Both transports over real HTTP: the same items, the same errors, no secrets anywhere.

Every test runs once per transport (``httpx``, ``aiohttp``) against the scripted SSE
server and expects the same outcome, so the aiohttp path is held to what the httpx
path already does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import (
    ConfigError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderProtocolError,
)
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import TRANSPORTS, Transport, check_transport
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.settings import LabSettings, load_settings
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.infrastructure.conftest import Collect
from tests.infrastructure.test_chat_client_http import (
    FAST_RETRY,
    KEY,
    assert_mapped,
    full_text,
    ok,
)
from tests.infrastructure.test_chat_client_provider_faults import ResetAfter, data_event
from tests.infrastructure.test_chat_client_streams import visible
from tests.offline_site import sitecustomize as offline

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)


def words(*parts: str) -> ScriptedResponse:
    events = [{"choices": [{"index": 0, "delta": {"content": part}}]} for part in parts]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return ScriptedResponse.sse(*events)


def client(url: str, transport: Transport, **options: object) -> OpenAICompatibleChatClient:
    return OpenAICompatibleChatClient(url, KEY, transport=transport, **options)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_stream_arrives_whole_and_in_order(transport: Transport, collect: Collect) -> None:
    async with (
        SSETranscriptServer(words("Hel", "lo", " there")) as server,
        client(server.base_url, transport) as chat,
    ):
        items = await collect(chat)
    assert visible(items) == "Hello there"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.asyncio
async def test_concurrent_streams_share_the_pool(transport: Transport, collect: Collect) -> None:
    async with (
        SSETranscriptServer(*[words(f"n{n}") for n in range(20)]) as server,
        client(server.base_url, transport) as chat,
    ):
        results = await asyncio.gather(*[collect(chat) for _ in range(20)])
    assert sorted(visible(items) for items in results) == sorted(f"n{n}" for n in range(20))


@pytest.mark.asyncio
async def test_a_401_is_an_http_error_not_retried(transport: Transport, collect: Collect) -> None:
    denied = ScriptedResponse.error(401, {"error": {"message": f"bad key {KEY}"}})
    async with (
        SSETranscriptServer(denied, ok()) as server,
        client(server.base_url, transport, max_retries=2) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    assert info.value.status == 401
    assert server.request_count == 1
    assert KEY not in full_text(info.value)
    assert_mapped(info.value)


@pytest.mark.asyncio
async def test_a_503_is_retried_then_succeeds(transport: Transport, collect: Collect) -> None:
    busy = ScriptedResponse.error(503, {"error": {"message": "busy"}}, headers=FAST_RETRY)
    async with (
        SSETranscriptServer(busy, ok()) as server,
        client(server.base_url, transport, max_retries=1) as chat,
    ):
        items = await collect(chat)
    assert visible(items) == "ok"
    assert server.request_count == 2


@pytest.mark.asyncio
async def test_exhausted_retries_are_the_last_http_error(
    transport: Transport, collect: Collect
) -> None:
    busy = ScriptedResponse.error(500, {"error": {"message": "down"}}, headers=FAST_RETRY)
    async with (
        SSETranscriptServer(fallback=busy) as server,
        client(server.base_url, transport, max_retries=1) as chat,
    ):
        with pytest.raises(ProviderHTTPError, match="down") as info:
            await collect(chat)
    assert info.value.status == 500
    assert server.request_count == 2


@pytest.mark.asyncio
async def test_a_malformed_event_is_a_protocol_error(
    transport: Transport, collect: Collect
) -> None:
    broken = ScriptedResponse(chunks=(b"data: {not json\n\n",))
    async with (
        SSETranscriptServer(broken) as server,
        client(server.base_url, transport, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderProtocolError):
            await collect(chat)


@pytest.mark.asyncio
async def test_a_connection_dropped_mid_stream_is_a_protocol_error(
    transport: Transport, collect: Collect
) -> None:
    dropped = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, done=False, abort=True
    )
    async with (
        SSETranscriptServer(dropped) as server,
        client(server.base_url, transport, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderProtocolError, match="broke off the stream") as info:
            await collect(chat)
    assert_mapped(info.value)
    # the same words over either transport, none of them an HTTP status
    assert str(info.value).endswith(
        "broke off the stream: peer closed connection without sending complete message body"
        " (incomplete chunked read)"
    )


@pytest.mark.asyncio
async def test_a_connection_dropped_before_the_answer_is_a_connection_error(
    transport: Transport, collect: Collect
) -> None:
    silent = ScriptedResponse(chunks=(), abort=True, status=200)
    async with (
        SSETranscriptServer(fallback=silent) as server,
        client(server.base_url, transport, max_retries=0) as chat,
    ):
        server_url = server.base_url
        server.stop()  # the port closes: nothing answers
        with pytest.raises(ProviderConnectionError) as info:
            await collect(chat)
    assert f"{server_url}/chat/completions" in str(info.value)
    assert KEY not in full_text(info.value)
    assert_mapped(info.value)


@pytest.mark.asyncio
async def test_an_idle_connection_the_server_closed_is_replaced(
    transport: Transport, collect: Collect
) -> None:
    async with (
        SSETranscriptServer(ok(), ok(), keep_alive=0.05) as server,
        client(server.base_url, transport, max_retries=0) as chat,
    ):
        await collect(chat)
        # A busy event loop: the server closes the idle connection while this loop
        # cannot notice, so the pool still holds it when the next call starts.
        time.sleep(0.3)  # noqa: ASYNC251 - the stall is the point of the test
        items = await collect(chat)
    assert visible(items) == "ok"
    assert server.request_count == 2


@pytest.mark.asyncio
async def test_another_host_is_refused_by_the_offline_guard(
    transport: Transport, collect: Collect
) -> None:
    before = len(offline.violations)
    async with client("http://192.0.2.1:8080/v1", transport, max_retries=0) as chat:
        with pytest.raises(ProviderConnectionError):
            await collect(chat)
    blocked = offline.violations[before:]
    del offline.violations[before:]  # the attempt was on purpose
    assert any("192.0.2.1" in line for line in blocked)


@pytest.mark.asyncio
async def test_the_key_never_reaches_logs_or_the_audit(
    transport: Transport, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    failing = ScriptedResponse.error(500, {"error": {"message": "retry me"}}, headers=FAST_RETRY)
    caplog.set_level(logging.DEBUG)
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    async with (
        SSETranscriptServer(failing, words("fine")) as server,
        client(server.base_url, transport, max_retries=1) as chat,
    ):
        runtime = DebugRuntime(chat, session_store=store)
        request = DebugRunRequest(
            session_id="s", user_message="hello", chat_agent=AgentParams(model="m")
        )
        outputs = [output async for output in runtime.run(request)]
        await runtime.aclose()
    store.close()
    assert any(output.get("type") == "message_delta" for output in outputs)
    assert server.request_count == 2
    assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert caplog.records
    assert KEY not in caplog.text
    assert KEY not in json.dumps(outputs)
    stored = await asyncio.to_thread(lambda: [p.read_bytes() for p in tmp_path.iterdir()])
    assert stored and all(KEY.encode() not in data for data in stored)


def test_the_setting_offers_every_transport(transport: Transport) -> None:
    settings = load_settings(environ={"AGENT_LAB_TRANSPORT": transport})
    assert settings.transport == transport
    assert check_transport(transport) == transport
    assert set(LabSettings.model_fields["transport"].annotation.__args__) == set(TRANSPORTS)  # type: ignore[union-attr]


def test_an_unknown_transport_is_a_config_error(transport: Transport) -> None:
    with pytest.raises(ConfigError, match="unknown HTTP transport 'curl'"):
        OpenAICompatibleChatClient("http://127.0.0.1:9/v1", transport="curl")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="transport"):
        load_settings(environ={"AGENT_LAB_TRANSPORT": "curl"})


@pytest.mark.asyncio
async def test_the_default_is_aiohttp_for_the_client_and_the_settings(transport: Transport) -> None:
    from agent_lab.infrastructure.openai_compat.aiohttp_transport import AiohttpTransport

    async with OpenAICompatibleChatClient("http://127.0.0.1:9/v1") as chat:
        await chat.warm_up()
        sdk: Any = chat._sdk
        pool = sdk._client._transport
    assert isinstance(pool, AiohttpTransport)
    assert LabSettings().transport == "aiohttp"


@pytest.mark.asyncio
async def test_a_connection_reset_mid_answer_is_a_protocol_error_not_unreachable(
    transport: Transport, collect: Collect
) -> None:
    """The endpoint answered and streamed: a reset then is a stream that broke off
    (``provider_error:protocol``, a provider-class failure), never "unreachable"."""
    words = (data_event("About "), data_event("to break"))
    async with (
        ResetAfter(words, chunked=True) as url,
        client(url, transport, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderProtocolError, match="broke off the stream") as info:
            await collect(chat)
    assert_mapped(info.value)
    assert info.value.failure_reason == "provider_error:protocol"
    assert not str(info.value).endswith(": ")  # it says what happened
