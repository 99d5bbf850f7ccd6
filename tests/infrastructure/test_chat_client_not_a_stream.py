"""A 2xx answer that is not an event stream is refused with what it was instead.

Over a real SSE server on 127.0.0.1: an HTML page or a plain-text notice fails the call
with a protocol error naming the content type and quoting the body (secrets masked).
Servers that send real SSE framing under another content type, or none, still work.
"""

from __future__ import annotations

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.domain.messages import StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import Transport
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.infrastructure.conftest import Collect

KEY = "sk-page-3c2b1a0f9e8d"
HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Log in</body></html>"
NOT_A_STREAM = "the endpoint did not answer with an event stream"


def _answer() -> ScriptedResponse:
    return ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )


async def _fails(
    response: ScriptedResponse, collect: Collect, transport: Transport = "aiohttp"
) -> str:
    async with (
        SSETranscriptServer(response) as server,
        OpenAICompatibleChatClient(
            server.base_url, KEY, max_retries=0, transport=transport
        ) as client,
    ):
        with pytest.raises(ProviderProtocolError) as info:
            await collect(client)
    return str(info.value)


def _text(items: list[StreamItem]) -> str:
    return "".join(item.content for item in items if item.kind == "message_delta")


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_an_html_page_is_refused_naming_its_content_type(
    collect: Collect, transport: Transport
) -> None:
    page = ScriptedResponse(body=HTML, content_type="text/html; charset=utf-8")
    message = await _fails(page, collect, transport)

    assert message.startswith(NOT_A_STREAM)
    assert "(content type text/html; charset=utf-8)" in message
    assert "<!DOCTYPE html>" in message and "<title>Sign in</title>" in message


@pytest.mark.asyncio
async def test_a_streamed_page_cut_into_small_writes_is_refused_too(collect: Collect) -> None:
    page = ScriptedResponse(chunks=(HTML,), content_type="text/html").split(3)
    message = await _fails(page, collect)

    assert message.startswith(NOT_A_STREAM)
    assert "(content type text/html)" in message and "<html>" in message


@pytest.mark.asyncio
async def test_a_plain_text_notice_is_quoted_with_the_key_masked(collect: Collect) -> None:
    notice = ScriptedResponse(
        body=f"Access denied for key {KEY}. Contact the admin.".encode(),
        content_type="text/plain",
    )
    message = await _fails(notice, collect)

    assert message.startswith(NOT_A_STREAM)
    assert "(content type text/plain)" in message
    assert "Access denied for key ***. Contact the admin." in message
    assert KEY not in message


@pytest.mark.asyncio
async def test_a_long_body_is_cut_in_the_message(collect: Collect) -> None:
    long_page = ScriptedResponse(body=b"<p>" + b"x" * 5000 + b"</p>", content_type="text/html")
    message = await _fails(long_page, collect)

    assert message.endswith("…")
    assert len(message) < 400


@pytest.mark.asyncio
async def test_json_lines_without_sse_framing_are_refused(collect: Collect) -> None:
    lines = ScriptedResponse(
        chunks=(b'{"message": {"content": "hi"}, "done": false}\n',),
        content_type="application/x-ndjson",
    )
    message = await _fails(lines, collect)

    assert message.startswith(NOT_A_STREAM)
    assert "(content type application/x-ndjson)" in message


@pytest.mark.parametrize(
    "content_type",
    [
        "text/event-stream",
        "text/event-stream; charset=utf-8",
        "Text/Event-Stream",
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-ndjson",
        "application/octet-stream",
        "",
    ],
)
@pytest.mark.parametrize("write_size", [1, 4096])
@pytest.mark.asyncio
async def test_sse_framing_is_read_whatever_the_content_type(
    collect: Collect, content_type: str, write_size: int
) -> None:
    answer = ScriptedResponse(chunks=_answer().chunks, content_type=content_type)
    async with (
        SSETranscriptServer(answer.split(write_size)) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        items = await collect(client)
    assert _text(items) == "hello"


@pytest.mark.parametrize("start", [b": keep-alive\n\n", b"\n\n", b"event: x\n", b"id: 1\n"])
@pytest.mark.asyncio
async def test_a_stream_opening_with_a_comment_blank_lines_or_another_field_is_read(
    collect: Collect, start: bytes
) -> None:
    answer = _answer()
    opened = ScriptedResponse(chunks=(start, *answer.chunks), content_type="text/plain")
    async with (
        SSETranscriptServer(opened) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        items = await collect(client)
    assert _text(items) == "hello"


@pytest.mark.asyncio
async def test_the_run_ends_with_a_provider_protocol_error() -> None:
    page = ScriptedResponse(body=HTML, content_type="text/html")
    request = DebugRunRequest(user_message="hi", chat_agent=AgentParams(model="m"))
    async with (
        SSETranscriptServer(page) as server,
        OpenAICompatibleChatClient(server.base_url, max_retries=0) as client,
    ):
        outputs = [output async for output in DebugRuntime(client).run(request)]

    error = outputs[-1]
    assert error["type"] == "error"
    assert NOT_A_STREAM in error["message"] and "text/html" in error["message"]
    assert error["failure_reason"] == "provider_error:protocol"
