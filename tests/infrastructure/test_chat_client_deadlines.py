"""The two deadlines of a call, over real HTTP: idle on content, and total; retries inside.

Each stream below would complete if the deadline under test did not hold, so the tests
assert which error ends the call, not how fast.
"""

from __future__ import annotations

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import (
    ConfigError,
    ProviderDeadlineExceeded,
    ProviderHTTPError,
    ProviderTimeout,
)
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import Chunk, Pause, ScriptedResponse, SSETranscriptServer

CONTENT = b'data: {"choices":[{"index":0,"delta":{"content":"late"}}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


async def _collect(client: OpenAICompatibleChatClient) -> list[StreamItem]:
    stream = client.stream_chat(
        [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
    )
    return [item async for item in stream]


def _filler(piece: bytes, count: int, every: float) -> tuple[Chunk, ...]:
    chunks: list[Chunk] = []
    for _ in range(count):
        chunks += [piece, Pause(every)]
    return tuple(chunks)


def _assert_states_elapsed(error: ProviderDeadlineExceeded) -> None:
    assert isinstance(error, ProviderTimeout)
    assert error.elapsed_s >= error.limit_s
    assert f"the call ran {error.elapsed_s:.1f} s" in str(error)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "filler", [b": keep-alive\n\n", b"data:\n\n", b'data: {"choices":[{"index":0,"delta":{}}]}\n\n']
)
async def test_keep_alives_and_empty_events_do_not_reset_the_idle_deadline(filler: bytes) -> None:
    # Three seconds of filler, then content: the call only completes if filler counted.
    stream = ScriptedResponse(chunks=(*_filler(filler, 30, 0.1), CONTENT, FINISH))
    async with (
        SSETranscriptServer(stream) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=0.5, max_retries=0) as client,
    ):
        with pytest.raises(ProviderDeadlineExceeded, match="idle deadline") as info:
            await _collect(client)
    assert info.value.deadline == "idle"
    assert info.value.limit_s == 0.5
    _assert_states_elapsed(info.value)


@pytest.mark.asyncio
async def test_content_resets_the_idle_deadline() -> None:
    stream = ScriptedResponse(chunks=(*_filler(CONTENT, 8, 0.1), FINISH))
    async with (
        SSETranscriptServer(stream) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=0.5, max_retries=0) as client,
    ):
        items = await _collect(client)
    assert [item.content for item in items if item.kind == "message_delta"] == ["late"] * 8


@pytest.mark.asyncio
async def test_total_deadline_ends_a_stream_that_keeps_sending_content() -> None:
    stream = ScriptedResponse(chunks=(*_filler(CONTENT, 30, 0.1), FINISH))
    async with (
        SSETranscriptServer(stream) as server,
        OpenAICompatibleChatClient(
            server.base_url, timeout=5, total_timeout=0.6, max_retries=0
        ) as client,
    ):
        with pytest.raises(ProviderDeadlineExceeded, match="total deadline") as info:
            await _collect(client)
    assert info.value.deadline == "total"
    assert info.value.limit_s == 0.6
    _assert_states_elapsed(info.value)


@pytest.mark.asyncio
async def test_no_headers_is_one_deadline_not_one_per_retry() -> None:
    silent = ScriptedResponse(delay=3.0, chunks=(CONTENT, FINISH))
    async with (
        SSETranscriptServer(silent, silent, silent) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=0.4, max_retries=2) as client,
    ):
        with pytest.raises(ProviderDeadlineExceeded, match="idle deadline") as info:
            await _collect(client)
        assert server.request_count == 1
    _assert_states_elapsed(info.value)


@pytest.mark.asyncio
async def test_retries_happen_inside_the_deadline() -> None:
    """The SDK's own backoff (no ``Retry-After``) sleeps inside the idle deadline; the
    retries end before it passes, with the provider's last answer as the error (the
    deadline only ended the retrying, the provider did answer)."""
    busy = ScriptedResponse.error(503, {"error": {"message": "busy"}})
    async with (
        SSETranscriptServer(*[busy] * 8) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=0.6, max_retries=7) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await _collect(client)
        assert 1 < server.request_count < 8
    assert str(info.value) == "provider returned HTTP 503: busy"


@pytest.mark.asyncio
async def test_a_retry_after_past_the_deadline_ends_the_retries_with_the_last_answer() -> None:
    """Retries whose ``Retry-After`` fits happen inside the deadline; the one that would
    wait past it is not waited for: the provider's answer is the error, not a timeout."""
    busy = ScriptedResponse.error(
        503, {"error": {"message": "busy"}}, headers={"retry-after-ms": "250"}
    )
    async with (
        SSETranscriptServer(*[busy] * 8) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=0.6, max_retries=7) as client,
    ):
        with pytest.raises(ProviderHTTPError) as info:
            await _collect(client)
        assert 1 < server.request_count < 8
    assert info.value.status == 503
    assert str(info.value) == "provider returned HTTP 503: busy"


@pytest.mark.asyncio
async def test_retries_that_succeed_inside_the_deadline_report_their_attempts() -> None:
    busy = ScriptedResponse.error(
        503, {"error": {"message": "busy"}}, headers={"retry-after-ms": "20"}
    )
    ok = ScriptedResponse(chunks=(CONTENT, FINISH))
    async with (
        SSETranscriptServer(busy, ok) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=5, max_retries=2) as client,
    ):
        stream = client.stream_chat(
            [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
        )
        items = [item async for item in stream]
    assert [item.content for item in items if item.kind == "message_delta"] == ["late"]
    assert stream.timing.attempts == 2


@pytest.mark.asyncio
async def test_a_call_refused_after_its_retries_reports_every_attempt() -> None:
    busy = ScriptedResponse.error(
        503, {"error": {"message": "busy"}}, headers={"retry-after-ms": "20"}
    )
    async with (
        SSETranscriptServer(busy, busy, busy) as server,
        OpenAICompatibleChatClient(server.base_url, timeout=5, max_retries=2) as client,
    ):
        stream = client.stream_chat(
            [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
        )
        with pytest.raises(ProviderHTTPError):
            _ = [item async for item in stream]
        assert server.request_count == 3
    assert stream.timing.attempts == 3
    assert stream.timing.connect_ms is None and stream.timing.total_ms is not None


@pytest.mark.parametrize("options", [{"timeout": 0}, {"timeout": -1}, {"total_timeout": 0}])
def test_deadlines_must_be_positive(options: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="positive"):
        OpenAICompatibleChatClient("http://127.0.0.1:9/v1", **options)  # type: ignore[arg-type]
