"""From raw body bytes to ``StreamItem``s, in process: every split of every recorded stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.domain.messages import StreamItem, TokenUsage
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream, token_usage
from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sse"
FAMILIES = ("openai", "vllm", "ollama", "llamacpp", "deepseek", "nim")
ALL_FIXTURES = sorted(path for family in FAMILIES for path in (FIXTURES / family).glob("*.json"))
ALIASES = {"calendar__schedule__create": "calendar.schedule.create"}


def body(path: Path) -> bytes:
    return "".join(json.loads(path.read_text(encoding="utf-8"))["chunks"]).encode()


def counter(prefix: str) -> Iterator[str]:
    return (f"{prefix}{n}" for n in count())


def parse(pieces: list[bytes], *, text_events: bool = False) -> list[StreamItem] | str:
    """All items of one stream, or the protocol error's message."""
    calls, events = counter("gen_"), counter("evt_")
    stream = ChunkStream(
        text_events=text_events,
        new_call_id=lambda: next(calls),
        new_event=lambda: next(events),
        resolve_name=lambda name: ALIASES.get(name, name),
    )
    try:
        return [item for piece in pieces for item in stream.feed(piece)] + stream.finish()
    except ProviderProtocolError as exc:
        return str(exc)


def summary(result: list[StreamItem] | str) -> object:
    """What must not depend on chunking: visible text, events, calls, usage, chunk count."""
    if isinstance(result, str):
        return result
    return (
        "".join(item.content for item in result if item.kind == "message_delta"),
        [
            (item.kind, item.event.model_dump() if item.event else None)
            for item in result
            if item.kind in {"text_event", "provider_tool_call"}
        ],
        [item.usage for item in result if item.kind == "usage"],
        [item.raw_chunk for item in result if item.kind == "raw_chunk"],
    )


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_two_way_split_gives_the_same_items(path: Path) -> None:
    data = body(path)
    expected = summary(parse([data], text_events=True))
    for cut in range(len(data) + 1):
        assert summary(parse([data[:cut], data[cut:]], text_events=True)) == expected, cut


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_one_byte_per_read_gives_the_same_items(path: Path) -> None:
    data = body(path)
    pieces = [data[i : i + 1] for i in range(len(data))]
    assert summary(parse(pieces)) == summary(parse([data]))


def test_text_event_fixture_split_at_every_byte_yields_the_same_events() -> None:
    data = body(FIXTURES / "openai" / "text_events.json")
    for cut in range(len(data) + 1):
        result = parse([data[:cut], data[cut:]], text_events=True)
        assert not isinstance(result, str)
        visible = "".join(item.content for item in result if item.kind == "message_delta")
        names = [item.event.name for item in result if item.event is not None]
        assert visible == "Let me book that for you.  I'll confirm shortly. ", cut
        assert names == ["calendar.schedule.create", "handoff_note", "session.terminate"], cut
        assert "<" not in visible


def test_without_text_events_markers_are_visible_text() -> None:
    result = parse([body(FIXTURES / "openai" / "text_events.json")], text_events=False)
    assert not isinstance(result, str)
    visible = "".join(item.content for item in result if item.kind == "message_delta")
    assert "<event>calendar.schedule.create, handoff_note</event>" in visible
    assert not any(item.kind == "text_event" for item in result)


def test_every_provider_chunk_becomes_a_raw_chunk_first() -> None:
    data = body(FIXTURES / "openai" / "text_cached_usage.json")
    result = parse([data])
    assert not isinstance(result, str)
    raw = [item for item in result if item.kind == "raw_chunk"]
    assert len(raw) == data.count(b"data: {")
    assert result[0].kind == "raw_chunk"
    assert raw[0].raw_chunk is not None and raw[0].raw_chunk["model"] == "gpt-4o-mini-2024-07-18"


def test_secrets_are_masked_in_parsed_chunks() -> None:
    mask = SecretMask(["sk-live-123"])
    stream = ChunkStream(text_events=False, new_call_id=lambda: "x", mask=mask)
    items = stream.feed(
        b'data: {"choices":[{"index":0,"delta":{"content":"key sk-live-123"},'
        b'"finish_reason":"stop"}]}\n\n'
    )
    assert [item.content for item in items if item.kind == "message_delta"] == ["key ***"]
    assert "sk-live-123" not in repr(items)
    assert all(b"sk-live-123" not in (item.raw_json or b"") for item in items)


def test_truncated_stream_is_a_protocol_error_not_a_completion() -> None:
    result = parse([body(FIXTURES / "openai" / "truncated.json")])
    assert isinstance(result, str)
    assert "malformed" in result or "ended before" in result


def test_eof_after_complete_chunks_without_finish_or_done_is_a_protocol_error() -> None:
    result = parse([b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'])
    assert result == (
        "the stream ended before the provider finished the answer (no finish_reason and no [DONE])"
    )


def test_done_without_finish_reason_completes() -> None:
    result = parse(
        [b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n']
    )
    assert summary(result) == (
        "Hi",
        [],
        [],
        [{"choices": [{"index": 0, "delta": {"content": "Hi"}}]}],
    )


@pytest.mark.parametrize(
    "chunk",
    [
        b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}',
        b'{"choices":null,"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}',
        b'{"usage":{"prompt_tokens":1,"completion_tokens":2}}',
    ],
)
def test_usage_chunk_with_empty_null_or_absent_choices(chunk: bytes) -> None:
    data = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: ' + chunk
    result = parse([data + b"\n\ndata: [DONE]\n\n"])
    assert not isinstance(result, str)
    assert [item.usage for item in result if item.kind == "usage"] == [
        TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    ]


def test_continuous_usage_reports_only_the_last_one() -> None:
    data = (
        b'data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,'
        b'"completion_tokens":1,"total_tokens":6}}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":'
        b'{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}\n\n'
    )
    result = parse([data])
    assert not isinstance(result, str)
    assert [item.usage for item in result if item.kind == "usage"] == [
        TokenUsage(prompt_tokens=5, completion_tokens=2, total_tokens=7)
    ]


def test_token_usage_reads_cached_tokens_and_deepseek_cache_hits() -> None:
    assert token_usage(
        {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 8}}
    ) == TokenUsage(prompt_tokens=10, completion_tokens=2, total_tokens=12, cached_tokens=8)
    assert (
        token_usage(
            {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "total_tokens": 12,
                "prompt_cache_hit_tokens": 4,
            }
        ).cached_tokens
        == 4
    )
    assert token_usage({"prompt_tokens": None, "prompt_tokens_details": None}) == TokenUsage()


def test_only_the_first_choice_is_read() -> None:
    data = (
        b'data: {"choices":[{"index":0,"delta":{"content":"A"}},'
        b'{"index":1,"delta":{"content":"B"}}]}'
        b"\n\ndata: [DONE]\n\n"
    )
    assert summary(parse([data]))[0] == "A"  # type: ignore[index]


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (b'{"error":{"message":"boom","type":"x"}}', "boom"),
        (b'{"error":"plain failure"}', "plain failure"),
        (b'{"object":"error","message":"worker died","code":500}', "worker died"),
    ],
)
def test_error_objects_mid_stream_raise_with_the_provider_message(
    chunk: bytes, message: str
) -> None:
    data = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: ' + chunk + b"\n\n"
    assert parse([data]) == f"the provider reported an error: {message}"


def test_error_event_type_raises() -> None:
    data = b'event: error\ndata: {"message":"overloaded"}\n\n'
    assert parse([data]) == "the provider reported an error: overloaded"


def test_malformed_chunk_raises() -> None:
    assert parse([b"data: {not json}\n\n"]) == "malformed stream chunk: {not json}"
    assert parse([b"data: [1, 2]\n\n"]) == "stream chunk is not a JSON object: [1, 2]"


def test_null_error_field_is_not_an_error() -> None:
    data = (
        b'data: {"error":null,"choices":[{"index":0,"delta":{"content":"ok"},'
        b'"finish_reason":"stop"}]}\n\n'
    )
    assert summary(parse([data]))[0] == "ok"  # type: ignore[index]


def test_reasoning_is_kept_in_raw_chunks_but_never_visible() -> None:
    for family, name in [("deepseek", "reasoning_keepalive"), ("ollama", "text_reasoning")]:
        result = parse([body(FIXTURES / family / f"{name}.json")])
        assert not isinstance(result, str)
        visible = "".join(item.content for item in result if item.kind == "message_delta")
        assert "Okay" not in visible and "Greeting" not in visible
        reasoning = [
            item.raw_chunk["choices"][0]["delta"].get("reasoning_content")
            or item.raw_chunk["choices"][0]["delta"].get("reasoning")
            for item in result
            if item.kind == "raw_chunk" and item.raw_chunk and item.raw_chunk["choices"]
        ]
        assert any(reasoning)
