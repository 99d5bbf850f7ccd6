"""The web lab's stream frames and the bounded send buffer of one connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
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
    """The bounded send buffer of one connection; it never blocks its producers.

    A client that lets more than ``maxsize`` frames wait is dropped, with one
    exception: frames queued while the server itself holds the connection's sends
    (``held``: the replay of an attach, with its history read) are the server's delay,
    not the client's. Up to ``HELD_BUFFERS`` times ``maxsize`` of them are kept (a
    client that does not take its replay either is still dropped); afterwards the
    client may let ``maxsize`` frames wait on top of what is left of that backlog."""

    HELD_BUFFERS = 8

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._limit = maxsize
        self._holds = 0
        self._slack = 0
        """What is left of the backlog a hold ended with (it shrinks as frames go)."""
        self.dropped = asyncio.Event()
        """Set when the buffer overflowed; the connection must be closed."""

    def offer(self, text: str) -> bool:
        """Queue ``text``; on overflow mark the outbox dropped and return ``False``."""
        if self.dropped.is_set():
            return False
        limit = self._limit * self.HELD_BUFFERS if self._holds else self._limit + self._slack
        if self._queue.qsize() >= limit:
            self.dropped.set()
            return False
        self._queue.put_nowait(text)
        return True

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """While the server sends past this outbox (a replay), frames that arrive do
        not count against the client (up to ``HELD_BUFFERS`` buffers of them)."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            self._slack = max(self._slack, self._queue.qsize())

    async def get(self) -> str:
        text = await self._queue.get()
        if self._slack:
            self._slack -= 1
        return text


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
