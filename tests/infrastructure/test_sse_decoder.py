"""The incremental SSE decoder, fed plain bytes split in every possible way."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_lab.infrastructure.openai_compat.sse import SseDecoder, SseEvent


def decode(*pieces: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events + decoder.flush()


STREAM = (
    b": keep-alive\n\n"
    b'data: {"a":1}\n\n'
    b"event: ping\ndata: x\n\n"
    b"data: first\ndata: second\n\n"
    b"id: 7\ndata:no-space\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent(b'{"a":1}'),
    SseEvent(b"x", "ping"),
    SseEvent(b"first\nsecond"),
    SseEvent(b"no-space", "message", "7"),
    SseEvent(b"[DONE]", "message", "7"),
]


def test_decodes_events_comments_fields_and_multiline_data() -> None:
    assert decode(STREAM) == EXPECTED


def test_every_two_way_split_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert decode(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_crlf_and_lone_cr_line_endings() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    cr = STREAM.replace(b"\n", b"\r")
    assert decode(crlf) == EXPECTED
    assert decode(cr) == EXPECTED


def test_crlf_split_between_reads_is_one_line_ending() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    for cut in [i + 1 for i, byte in enumerate(crlf) if byte == ord("\r")]:
        assert decode(crlf[:cut], crlf[cut:]) == EXPECTED, cut


def test_comment_only_stream_yields_nothing() -> None:
    assert decode(b": keep-alive\n\n: keep-alive\r\n\r\n") == []


def test_event_without_data_is_not_dispatched_and_resets_the_type() -> None:
    assert decode(b"event: ping\n\ndata: x\n\n") == [SseEvent(b"x")]


def test_flush_dispatches_a_final_event_without_blank_line() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.flush() == [SseEvent(b"[DONE]")]
    assert decoder.flush() == []


def test_flush_of_a_finished_stream_is_empty() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\n") == [SseEvent(b"a")]
    assert decoder.flush() == []


def test_only_cr_and_lf_end_lines() -> None:
    # bytes.splitlines must not split on vertical tab, form feed or NEL inside data.
    assert decode(b"data: a\x0bb\x0cc\x1cd\x85e\n\n") == [SseEvent(b"a\x0bb\x0cc\x1cd\x85e")]


def test_multibyte_utf8_split_inside_a_character() -> None:
    data = "data: Zürich °C\n\n".encode()
    cut = data.index("ü".encode()) + 1
    assert decode(data[:cut], data[cut:]) == [SseEvent("Zürich °C".encode())]


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode(*pieces) == EXPECTED


def test_an_error_field_is_an_error_event_ahead_of_the_events_data() -> None:
    """llama.cpp's ``error: {...}`` line is kept (not dropped as an unknown field),
    however the bytes are split."""
    stream = b'data: {"a":1}\n\nerror: {"message":"full"}\n\ndata: [DONE]\n\n'
    expected = [SseEvent(b'{"a":1}'), SseEvent(b'{"message":"full"}', "error"), SseEvent(b"[DONE]")]
    for cut in range(len(stream) + 1):
        assert decode(stream[:cut], stream[cut:]) == expected, cut
