"""The web lab's stream frames and the bounded send buffer of one connection."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import orjson

CLOSE_SLOW_CONSUMER = 1008
"""Close code of a connection whose send buffer overflowed (it may resume)."""


@dataclass(frozen=True)
class Frame:
    """One stream frame: its offset and its JSON text ``{"offset", "message"}``."""

    offset: int
    text: str


def dropped_frame(contents: list[str], reason: str) -> dict[str, Any]:
    """The ``dropped`` control frame: the user turns that will never run, oldest first,
    and why (``drop_queued``, ``close``: a client asked; ``session_ended``)."""
    return {"type": "dropped", "count": len(contents), "contents": contents, "reason": reason}


def dumps(value: Any) -> str:
    """JSON text of a frame or control message (anything odd becomes a string)."""
    return orjson.dumps(value, default=_fallback).decode()


def _fallback(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


class Outbox:
    """The bounded send buffer of one connection; it never blocks its producers."""

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue(maxsize)
        self.dropped = asyncio.Event()
        """Set when the buffer overflowed; the connection must be closed."""

    def offer(self, text: str) -> bool:
        """Queue ``text``; on overflow mark the outbox dropped and return ``False``."""
        if self.dropped.is_set():
            return False
        try:
            self._queue.put_nowait(text)
        except asyncio.QueueFull:
            self.dropped.set()
            return False
        return True

    async def get(self) -> str:
        return await self._queue.get()


@dataclass(frozen=True)
class Replay:
    """What a new subscriber needs before live frames.

    Attributes:
        frames: Buffered frames to send first, in order.
        history_before: ``None`` when ``frames`` continue the client's offset;
            otherwise send the stored history of turns before this index first.
        truncated: The turn in progress began before the oldest buffered frame.
    """

    frames: list[Frame]
    history_before: int | None
    truncated: bool = False


class UserMessageFrame(TypedDict):
    """The hub's own frame: the user message of a turn, just before its ``turn_started``."""

    type: Literal["user_message"]
    turn_index: int | None
    content: str


class TurnRecordFrame(TypedDict):
    """The hub's own frame: a turn's record so far (``TurnRecord`` as JSON values),
    after each audit that changes it; the page renders a turn from it, live as when
    reopened."""

    type: Literal["turn_record"]
    turn_index: int
    record: dict[str, Any]
