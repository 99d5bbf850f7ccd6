"""Provider-compatibility cases over real HTTP: why an answer ended, tool calls with no
id, content sent as typed parts, a 5xx that the retries cannot outlast and an HTML
error page."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import ProviderDeadlineExceeded, ProviderHTTPError
from agent_lab.domain.events import CutOffToolCall
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import Pause, ScriptedResponse, SSETranscriptServer
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


# --- a 5xx whose retries run past the deadline ------------------------------------------

_OVERLOADED = {"error": {"message": f"model overloaded for key {KEY}", "type": "server_error"}}


def _slow_503(delay: float) -> ScriptedResponse:
    """A 503 with no ``Retry-After``, answered after ``delay`` seconds."""
    return ScriptedResponse(
        status=503,
        body=json.dumps(_OVERLOADED).encode(),
        content_type="application/json",
        delay=delay,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("deadlines", "delay"),
    [
        pytest.param({"timeout": 2.0}, 0.9, id="idle-during-a-retry"),
        pytest.param({"timeout": 1.0}, 0.8, id="idle-during-the-backoff"),
        pytest.param({"timeout": 60.0, "total_timeout": 2.0}, 0.9, id="total"),
    ],
)
async def test_a_5xx_whose_retries_outlast_the_deadline_is_reported_as_the_5xx(
    deadlines: dict[str, float], delay: float
) -> None:
    """Every answer is a 503 and the SDK's backoff or its next attempt runs past the
    deadline: the call fails with the provider's 503 and its message (the key
    masked), not with "it sent no content"."""
    async with (
        SSETranscriptServer(*[_slow_503(delay)] * 3) as server,
        _client(server.base_url, max_retries=2, **deadlines) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            _ = [item async for item in chat.stream_chat([], [], AgentParams(model="m"))]
    assert info.value.status == 503
    assert str(info.value) == "provider returned HTTP 503: model overloaded for key ***"
    assert info.value.failure_reason == "provider_error:http_503"
    assert KEY not in repr(info.value.__cause__) + repr(info.value.__context__)


@pytest.mark.asyncio
async def test_a_provider_that_never_answers_is_still_an_idle_timeout() -> None:
    """No error answer came at all: the deadline is what ended the call."""
    silent = ScriptedResponse.sse(_chunk({"content": "late"}), delay=3.0)
    async with (
        SSETranscriptServer(silent) as server,
        _client(server.base_url, max_retries=2, timeout=1.0) as chat,
    ):
        with pytest.raises(ProviderDeadlineExceeded) as info:
            _ = [item async for item in chat.stream_chat([], [], AgentParams(model="m"))]
    assert info.value.deadline == "idle"


@pytest.mark.asyncio
async def test_a_5xx_then_an_answer_within_the_deadline_is_retried(collect: Collect) -> None:
    answer = ScriptedResponse.sse(_chunk({"content": "Recovered."}, "stop"))
    async with (
        SSETranscriptServer(_slow_503(0.0), answer) as server,
        _client(server.base_url, max_retries=2, timeout=10.0) as chat,
    ):
        items = await collect(chat)
        assert server.request_count == 2
    assert [item.content for item in items if item.kind == "message_delta"] == ["Recovered."]


@pytest.mark.asyncio
async def test_a_retry_that_answers_and_then_stalls_is_an_idle_timeout() -> None:
    """A 503, then an answer whose stream sends nothing: the 503 was outlived, so the
    deadline that passes in the stream is reported as the timeout it is."""
    stalled = ScriptedResponse(chunks=(Pause(5.0),))
    async with (
        SSETranscriptServer(_slow_503(0.0), stalled) as server,
        _client(server.base_url, max_retries=2, timeout=1.5) as chat,
    ):
        with pytest.raises(ProviderDeadlineExceeded) as info:
            _ = [item async for item in chat.stream_chat([], [], AgentParams(model="m"))]
    assert info.value.deadline == "idle"


# --- tool calls without ids --------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "fragments",
    [
        pytest.param(
            [
                [{"index": 0, "function": {"name": "f", "arguments": '{"x": 1}'}}],
                [{"index": 1, "function": {"name": "f", "arguments": '{"x": 2}'}}],
            ],
            id="distinct-indexes",
        ),
        pytest.param(
            [
                [
                    {"function": {"name": "f", "arguments": '{"x": 1}'}},
                    {"function": {"name": "f", "arguments": '{"x": 2}'}},
                ]
            ],
            id="no-index-one-delta",
        ),
        pytest.param(
            [
                [{"index": 0, "function": {"name": "f", "arguments": '{"x": 1}'}}],
                [{"index": 0, "function": {"name": "f", "arguments": '{"x": 2}'}}],
            ],
            id="one-index-two-deltas",
        ),
    ],
)
async def test_tool_calls_without_ids_are_separate_calls_with_their_own_ids(
    collect: Collect, fragments: list[list[dict[str, Any]]]
) -> None:
    body = ScriptedResponse.sse(
        *(_chunk({"tool_calls": delta}) for delta in fragments), _chunk({}, "tool_calls")
    )
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        calls = _calls(await collect(chat, tools=TOOLS))
    assert [call.arguments for call in calls] == [{"x": 1}, {"x": 2}]
    assert len({call.id for call in calls}) == 2
    assert all(call.id.startswith("call_") for call in calls)


# --- content as typed parts --------------------------------------------------------------


@pytest.mark.asyncio
async def test_content_sent_as_typed_parts_is_shown_as_its_text(collect: Collect) -> None:
    body = ScriptedResponse.sse(
        _chunk({"content": [{"type": "text", "text": "Hello, "}]}),
        _chunk({"content": [{"type": "text", "text": "wide "}, {"type": "text", "text": "world"}]}),
        _chunk({"content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}),
        _chunk({"content": [{"type": "text", "text": "."}]}, "stop"),
    )
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        items = await collect(chat)
    shown = [item.content for item in items if item.kind == "message_delta"]
    assert "".join(shown) == "Hello, wide world."


@pytest.mark.asyncio
async def test_typed_text_parts_can_carry_an_event_block(collect: Collect) -> None:
    """Without tools the parts' text is read for inline event blocks like any text."""
    parts = [{"type": "text", "text": "On it. <event>handoff_note</event>"}]
    body = ScriptedResponse.sse(_chunk({"content": parts}), _chunk({}, "stop"))
    async with SSETranscriptServer(body) as server, _client(server.base_url) as chat:
        items = await collect(chat)
    assert "".join(i.content for i in items if i.kind == "message_delta") == "On it. "
    assert [i.event.name for i in items if i.kind == "text_event" and i.event] == ["handoff_note"]


# --- an HTML error page ------------------------------------------------------------------

_PADDING = "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n"
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    + _PADDING * 30
    + "</body>\r\n</html>\r\n"
)


def _page(status: int, html: str, content_type: str = "text/html") -> ScriptedResponse:
    return ScriptedResponse(status=status, body=html.encode(), content_type=content_type)


@pytest.mark.asyncio
@pytest.mark.parametrize("content_type", ["text/html", "text/plain"])
async def test_an_html_error_page_is_reported_by_its_title(
    collect: Collect, content_type: str
) -> None:
    """nginx's 2 KB 502 page reads as its title, whatever content type it came with."""
    assert len(NGINX_502) > 2000
    async with (
        SSETranscriptServer(_page(502, NGINX_502, content_type)) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    assert str(info.value) == (
        "provider returned HTTP 502: 502 Bad Gateway: nginx/1.25.3 (an HTML page)"
    )
    assert info.value.failure_reason == "provider_error:http_502"


@pytest.mark.asyncio
async def test_an_html_page_without_a_title_gives_its_first_text_cut_short(
    collect: Collect,
) -> None:
    words = " ".join(f"word{n}" for n in range(100))
    html = f"<!DOCTYPE html><html><body><script>var x = 1;</script><p>{words}</p></body></html>"
    async with (
        SSETranscriptServer(_page(503, html)) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    message = info.value.provider_message
    assert message.startswith("word0 word1 word2") and message.endswith("… (an HTML page)")
    assert "var x" not in message and "<" not in message
    assert len(message) <= 200 + len(" (an HTML page)")


@pytest.mark.asyncio
async def test_a_key_echoed_in_an_html_error_page_is_masked(collect: Collect) -> None:
    html = (
        f"<html><head><title>Forbidden</title></head><body><h1>Forbidden</h1>"
        f"<p>The key {KEY} is not allowed here.</p>{_PADDING * 10}</body></html>"
    )
    async with (
        SSETranscriptServer(_page(403, html)) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    assert str(info.value) == (
        "provider returned HTTP 403: Forbidden: The key *** is not allowed here. (an HTML page)"
    )
    assert KEY not in repr(info.value.__cause__)


@pytest.mark.asyncio
async def test_a_plain_text_error_body_is_still_given_as_written(collect: Collect) -> None:
    body = ScriptedResponse.error(500, "upstream <b>timeout</b> after 30 s")
    async with (
        SSETranscriptServer(body) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    assert info.value.provider_message == "upstream <b>timeout</b> after 30 s"


@pytest.mark.asyncio
async def test_a_key_where_the_html_summary_is_cut_leaves_no_part_of_it(
    collect: Collect,
) -> None:
    """The page is masked before it is cut: a key across the cut cannot leave its
    first characters behind, unrecognised."""
    html = f"<html><body><p>{'x' * 190} {KEY} and more</p></body></html>"
    async with (
        SSETranscriptServer(_page(502, html)) as server,
        _client(server.base_url, max_retries=0) as chat,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await collect(chat)
    assert KEY[:6] not in str(info.value)
    assert "***" in str(info.value)
