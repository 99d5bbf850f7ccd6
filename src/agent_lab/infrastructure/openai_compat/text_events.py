"""Streaming parser of inline event blocks in visible text (``dual_agent`` mode, no I/O).

A block is ``EVENT_BLOCK_START name[, name ...] EVENT_BLOCK_END``. The parser never
returns marker text; between reads it holds back only a suffix that could begin
``EVENT_BLOCK_START`` (or, inside a block, the block's text so far). A block still open
when the stream ends still names its events.

Only a well-formed block names events: comma-separated names of at most 64 characters
from ``A-Z a-z 0-9 _ . -`` (empty entries are skipped). As soon as the text after a start
marker can no longer be such a list (prose such as ``<event> tags are...``), the marker
and the text are shown as written and parsing goes on after the marker, so prose never
becomes an event and never disappears.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from uuid import uuid4

from agent_lab.domain.events import (
    EVENT_BLOCK_END,
    EVENT_BLOCK_START,
    TOOL_NAME_PATTERN,
    ToolCallEvent,
)

TextPiece = str | ToolCallEvent
"""Visible text, or an event named in a block."""


def new_event_id() -> str:
    """Returns a fresh, globally unique event id (``evt_`` + 32 hex digits)."""
    return f"evt_{uuid4().hex}"


_NAME = re.compile(TOOL_NAME_PATTERN)
_PARTIAL_NAME = re.compile(rf"\s*(?:{TOOL_NAME_PATTERN}\s*)?")
_MAX_BLOCK = 2048
"""A block longer than this is prose, whatever it contains."""


def _is_block(text: str) -> bool:
    """Whether ``text`` (between the markers) is a list of event names."""
    return len(text) <= _MAX_BLOCK and all(
        not part or _NAME.fullmatch(part) for part in (p.strip() for p in text.split(","))
    )


def _may_become_block(text: str) -> bool:
    """Whether ``text``, the start of an unclosed block, can still become a block."""
    text = _trim_partial_end(text)
    *complete, last = text.split(",")
    return (
        len(text) <= _MAX_BLOCK
        and _PARTIAL_NAME.fullmatch(last) is not None
        and _is_block(",".join(complete))
    )


def _held_back(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of the start marker."""
    first = EVENT_BLOCK_START[0]
    start = text.find(first, max(0, len(text) - len(EVENT_BLOCK_START) + 1))
    while start != -1:
        if EVENT_BLOCK_START.startswith(text[start:]):
            return len(text) - start
        start = text.find(first, start + 1)
    return 0


def _trim_partial_end(text: str) -> str:
    for size in range(min(len(EVENT_BLOCK_END) - 1, len(text)), 0, -1):
        if EVENT_BLOCK_END.startswith(text[-size:]):
            return text[:-size]
    return text


class TextEventParser:
    """Splits streamed text into visible text and events named in inline blocks."""

    __slots__ = ("_in_block", "_new_id", "_pending")

    def __init__(self, new_id: Callable[[], str] = new_event_id) -> None:
        """Creates a parser outside any block.

        Args:
            new_id: Supplies the id of every event (unique per call by default).
        """
        self._new_id = new_id
        self._pending = ""
        self._in_block = False

    def feed(self, text: str) -> list[TextPiece]:
        """Parses the next piece of streamed text.

        Args:
            text: Content split anywhere, even inside a marker.

        Returns:
            Visible text and events, in the order they appeared.
        """
        if not self._pending and not self._in_block and EVENT_BLOCK_START[0] not in text:
            return [text] if text else []  # the common case: plain text, nothing held
        buffer = self._pending + text if self._pending else text
        pieces: list[TextPiece] = []
        held = False
        while buffer and not held:
            read = self._read_block if self._in_block else self._read_prose
            buffer, held = read(buffer, pieces)
        self._pending = buffer
        return pieces

    def _read_block(self, buffer: str, pieces: list[TextPiece]) -> tuple[str, bool]:
        """Reads on inside a block: its events once it closes, or prose if it can't be one.

        Returns:
            The text left to read, and whether it is held back for the next piece.
        """
        end = buffer.find(EVENT_BLOCK_END)
        if end == -1 and _may_become_block(buffer):
            return buffer, True
        if end != -1 and _is_block(buffer[:end]):
            pieces.extend(self._events(buffer[:end]))
            buffer = buffer[end + len(EVENT_BLOCK_END) :]
        else:  # prose after all: show the marker, read on after it
            pieces.append(EVENT_BLOCK_START)
        self._in_block = False
        return buffer, False

    def _read_prose(self, buffer: str, pieces: list[TextPiece]) -> tuple[str, bool]:
        """Reads visible text up to the next block's start, holding back a partial marker."""
        start = buffer.find(EVENT_BLOCK_START)
        if start == -1:
            keep = _held_back(buffer)
            visible = buffer[: len(buffer) - keep]
            if visible:
                pieces.append(visible)
            return buffer[len(buffer) - keep :], True
        if start:
            pieces.append(buffer[:start])
        self._in_block = True
        return buffer[start + len(EVENT_BLOCK_START) :], False

    def finish(self) -> list[TextPiece]:
        """Ends the text: held-back text becomes visible, an open block names its events.

        Returns:
            The remaining pieces; the parser is reset for reuse.
        """
        pending, in_block = self._pending, self._in_block
        self._pending, self._in_block = "", False
        if in_block:
            block = _trim_partial_end(pending)
            if _is_block(block):
                return list(self._events(block))
            self._pending = ""
            return [EVENT_BLOCK_START, *self.feed(pending), *self.finish()]
        return [pending] if pending else []

    def _events(self, block: str) -> list[ToolCallEvent]:
        return [
            ToolCallEvent(id=self._new_id(), name=name, arguments={}, raw_arguments="{}")
            for name in (part.strip() for part in block.split(","))
            if name
        ]
