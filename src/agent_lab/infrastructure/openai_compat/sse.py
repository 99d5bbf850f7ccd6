"""Incremental decoder of a ``text/event-stream`` body: bytes in, events out, no I/O.

Follows the WHATWG event-stream rules that matter for chat completion streams: lines
end with ``\\n``, ``\\r\\n`` or ``\\r`` (a CRLF may be split across two reads), lines
starting with ``:`` are comments (``: keep-alive``), ``data`` lines of one event are
joined with ``\\n``, and a blank line dispatches the event.

One field outside the standard is kept: llama.cpp's server reports a failure during a
stream as a line ``error: {"code":…,"message":…,"type":…}`` (then ends the stream with
``data: [DONE]``). Such a value is dispatched as an event of type ``error`` ahead of the
event's data, so the failure cannot be dropped as an unknown field.
"""

from __future__ import annotations

from typing import NamedTuple

_LF = 10
_CR = 13
_COLON = 58


class SseEvent(NamedTuple):
    """One dispatched server-sent event."""

    data: bytes
    """The event's data lines joined with ``\\n`` (``b"[DONE]"`` for the end marker)."""
    event: str = "message"
    """The ``event:`` field, ``message`` when the server sent none."""
    id: str | None = None
    """The last ``id:`` field seen so far, if any."""


class SseDecoder:
    """Turns the bytes of an event stream, read in arbitrary pieces, into ``SseEvent``s."""

    __slots__ = ("_data", "_error", "_event", "_last_id", "_skip_lf", "_tail")

    def __init__(self) -> None:
        self._tail = b""
        self._skip_lf = False
        self._data: list[bytes] = []
        self._error: list[bytes] = []
        self._event = ""
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decodes one read of the body.

        Args:
            chunk: The next bytes of the stream, split anywhere.

        Returns:
            The events completed by these bytes, in order.
        """
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if self._tail:
            chunk = self._tail + chunk
        if not chunk:
            return []
        lines = chunk.splitlines()
        last = chunk[-1]
        if last in (_LF, _CR):
            self._tail = b""
            # A CR may be the first half of a CRLF whose LF arrives in the next read.
            self._skip_lf = last == _CR
        else:
            self._tail = lines.pop()
        events: list[SseEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def flush(self) -> list[SseEvent]:
        """Ends the stream, dispatching an event whose final blank line never came.

        Returns:
            The last event, if the stream ended inside one.
        """
        events: list[SseEvent] = []
        if self._tail:
            self._line(self._tail, events)
            self._tail = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value[:1] == b" " else value)
        elif not line:
            self._dispatch(events)
        elif line[0] != _COLON:
            self._field(line)

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self._last_id = value.decode("utf-8", "replace")
        elif name == b"error":
            self._error.append(value)

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._error:
            events.append(SseEvent(b"\n".join(self._error), "error", self._last_id))
            self._error = []
        data = self._data
        if data:
            payload = data[0] if len(data) == 1 else b"\n".join(data)
            events.append(SseEvent(payload, self._event or "message", self._last_id))
            self._data = []
        self._event = ""
