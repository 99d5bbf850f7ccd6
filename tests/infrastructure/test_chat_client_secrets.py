"""Credentials never leave the client, whatever encoding a provider echoes them in.

Every test goes through a real SSE server on 127.0.0.1 that writes the raw bytes a
provider or proxy would: the key plain, upper and lower case, JSON-escaped (``\\/``,
``\\uXXXX``) and URL-encoded.
"""

from __future__ import annotations

import asyncio
import json
import socket
import traceback
from pathlib import Path
from urllib.parse import quote

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ProviderConnectionError, ProviderHTTPError
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

KEY = "sk-Test/9f8e+7d6c=5b4aQ"
"""A key with ``/``, ``+`` and ``=``, so that every encoding below spells it differently."""
PROBES = ("9f8e", "7d6c", "5b4aq")
"""Fragments of the key that no masked text may still contain (compared in lower case)."""


def _unicode_escaped(text: str) -> str:
    return "".join(f"\\u{ord(char):04x}" for char in text)


ENCODINGS: dict[str, str] = {
    "plain": KEY,
    "upper": KEY.upper(),
    "lower": KEY.lower(),
    "json-slash": KEY.replace("/", "\\/"),
    "json-unicode": _unicode_escaped(KEY),
    "json-unicode-upper-hex": _unicode_escaped(KEY).upper().replace("\\U", "\\u"),
    "url": quote(KEY, safe=""),
    "url-lower-hex": quote(KEY, safe="").replace("%2F", "%2f").replace("%2B", "%2b"),
}
"""How each encoding appears *inside a JSON string* in the raw bytes on the wire."""


def _leaks(text: str) -> bool:
    lowered = text.lower()
    return any(probe in lowered for probe in PROBES)


def _content_chunk(raw_text: str) -> bytes:
    return b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}],"debug":{"k":"%s"}}\n\n' % (
        raw_text.encode(),
        raw_text.encode(),
    )


def _echo_stream(encoded: str) -> ScriptedResponse:
    finish = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    return ScriptedResponse(
        chunks=(_content_chunk(f"key {encoded} end"), finish, b"data: [DONE]\n\n")
    )


async def _collect(client: OpenAICompatibleChatClient) -> list[StreamItem]:
    stream = client.stream_chat(
        [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
    )
    return [item async for item in stream]


@pytest.mark.asyncio
@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
async def test_key_echoed_in_content_is_masked_in_text_and_raw_chunks(encoding: str) -> None:
    async with (
        SSETranscriptServer(_echo_stream(ENCODINGS[encoding])) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        items = await _collect(client)
    visible = "".join(item.content for item in items if item.kind == "message_delta")
    assert visible == "key *** end"
    raw = [item for item in items if item.kind == "raw_chunk"]
    assert raw and raw[0].raw_chunk is not None
    assert raw[0].raw_chunk["debug"] == {"k": "key *** end"}
    for item in raw:
        assert item.raw_json is not None
        assert not _leaks(item.raw_json.decode()), item.raw_json
        assert json.loads(item.raw_json) == item.raw_chunk
        assert not _leaks(json.dumps(item.raw_chunk))


@pytest.mark.asyncio
@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
async def test_key_echoed_in_an_error_body_is_masked(encoding: str) -> None:
    body = b'{"error":{"message":"Incorrect API key provided: %s."}}' % ENCODINGS[encoding].encode()
    failing = ScriptedResponse(status=401, body=body, content_type="application/json")
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=0) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await _collect(client)
    assert info.value.provider_message == "Incorrect API key provided: ***."
    assert not _leaks("".join(traceback.format_exception(info.value)))
    assert not _leaks(repr(info.value.__cause__))


@pytest.mark.asyncio
@pytest.mark.parametrize("encoding", ["plain", "url", "json-slash", "upper"])
async def test_key_echoed_in_a_plain_text_error_body_is_masked(encoding: str) -> None:
    failing = ScriptedResponse.error(500, f"upstream said: Bearer {ENCODINGS[encoding]}")
    async with (
        SSETranscriptServer(failing) as server,
        OpenAICompatibleChatClient(server.base_url, KEY, max_retries=0) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await _collect(client)
    assert info.value.provider_message == "upstream said: Bearer ***"


@pytest.mark.asyncio
async def test_key_echoed_in_an_error_event_mid_stream_is_masked() -> None:
    error = b'data: {"error":{"message":"bad key %s"}}\n\n' % ENCODINGS["json-unicode"].encode()
    async with (
        SSETranscriptServer(ScriptedResponse(chunks=(error,))) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        with pytest.raises(Exception, match=r"bad key \*\*\*") as info:
            await _collect(client)
    assert not _leaks("".join(traceback.format_exception(info.value)))


@pytest.mark.asyncio
async def test_key_echoed_in_content_never_reaches_the_database(tmp_path: Path) -> None:
    files = await _run_echo_session(tmp_path)
    assert any(b"key *** end" in data for data in files.values())  # the answers were stored
    for name, data in files.items():
        assert not _leaks(data.decode("latin-1")), name


async def _run_echo_session(tmp_path: Path) -> dict[str, bytes]:
    """What the runtime audits and stores comes from the masked chunks."""
    responses = [_echo_stream(encoded) for encoded in ENCODINGS.values()]
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    async with (
        SSETranscriptServer(*responses) as server,
        OpenAICompatibleChatClient(server.base_url, KEY) as client,
    ):
        runtime = DebugRuntime(client, session_store=store)
        for index in range(len(responses)):
            request = DebugRunRequest(
                session_id="echo",
                user_message=f"question {index}",
                chat_agent=AgentParams(model="m"),
            )
            outputs = [output async for output in runtime.run(request)]
            assert not _leaks(json.dumps(outputs))
            assert any(o.get("type") == "message_delta" for o in outputs)
        await runtime.aclose()
    store.close()
    return await asyncio.to_thread(lambda: {p.name: p.read_bytes() for p in tmp_path.iterdir()})


def test_credentials_in_the_base_url_are_masked_in_the_repr() -> None:
    url = "http://lab-user:hunter2-secret@127.0.0.1:9/v1?api-key=query-secret-1&region=eu"
    text = repr(OpenAICompatibleChatClient(url))
    assert "hunter2-secret" not in text
    assert "query-secret-1" not in text
    assert "127.0.0.1:9/v1" in text and "region=eu" in text


@pytest.mark.asyncio
@pytest.mark.parametrize("query", ["api-key", "key", "token"])
async def test_credentials_in_the_base_url_are_masked_in_errors(query: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://lab-user:hunter2-secret@127.0.0.1:{port}/v1?{query}=query-secret-1"
    async with OpenAICompatibleChatClient(url, max_retries=0) as client:
        with pytest.raises(ProviderConnectionError) as info:
            await _collect(client)
    text = "".join(traceback.format_exception(info.value))
    assert "hunter2-secret" not in text
    assert "query-secret-1" not in text
    assert f"127.0.0.1:{port}" in str(info.value)


@pytest.mark.asyncio
async def test_url_password_echoed_by_the_provider_is_masked() -> None:
    failing = ScriptedResponse.error(403, {"error": {"message": "denied for hunter2\\/secret"}})
    async with SSETranscriptServer(failing) as server:
        url = server.base_url.replace("http://", "http://lab-user:hunter2%2Fsecret@")
        async with OpenAICompatibleChatClient(url, max_retries=0) as client:
            with pytest.raises(ProviderHTTPError) as info:
                await _collect(client)
    assert "hunter2" not in "".join(traceback.format_exception(info.value))


@pytest.mark.parametrize(
    ("api_key", "headers", "where"),
    [
        ("sk-…", {}, "api_key cannot be sent in an HTTP header: character 4 is U+2026"),
        ("sk-HIDDENvalueé", {}, "character 15 is U+00E9"),
        ("sk-HIDDEN\nInjected: 1", {}, "character 10 is U+000A"),
        (None, {"X-Api-Key": "HIDDEN\r\nvalue"}, "header 'X-Api-Key' cannot be sent"),
    ],
)
def test_a_key_or_header_http_cannot_carry_is_refused_without_showing_it(
    api_key: str | None, headers: dict[str, str], where: str
) -> None:
    from agent_lab.domain.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        OpenAICompatibleChatClient(
            "http://127.0.0.1:9/v1", api_key=api_key, default_headers=headers
        )
    assert where in str(refused.value)
    assert "HIDDEN" not in str(refused.value)
    assert refused.value.failure_reason == "config_error"


@pytest.mark.asyncio
async def test_a_printable_key_still_reaches_the_provider_as_a_bearer_token() -> None:
    with SSETranscriptServer(fallback=_echo_stream("ok")) as server:
        key = "sk-Printable~ASCII\tkey"
        async with OpenAICompatibleChatClient(server.base_url, api_key=key) as client:
            await _collect(client)
        assert server.requests[-1].headers["authorization"] == f"Bearer {key}"
