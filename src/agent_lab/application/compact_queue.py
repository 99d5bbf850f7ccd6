"""``CompactQueue``: an ``asyncio.Queue`` that allocates what it rarely needs only when needed."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

T = TypeVar("T")

_NO_WAITERS: tuple[()] = ()
"""Stands in for the putters of an unbounded queue: nobody ever waits to put."""


class _Finished:
    """``asyncio.Queue``'s "all items processed" flag; the real ``Event`` (and its
    waiter deque) is made only when someone ``join()``s."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._value = True
        self._event: asyncio.Event | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        self._value = True
        if self._event is not None:
            self._event.set()

    def clear(self) -> None:
        self._value = False
        if self._event is not None:
            self._event.clear()

    async def wait(self) -> bool:
        if self._value:
            return True
        if self._event is None:
            self._event = asyncio.Event()
        return await self._event.wait()


class CompactQueue(asyncio.Queue[T]):
    """An ``asyncio.Queue`` that allocates what an unbounded queue rarely needs only
    when it is needed.

    A plain queue holds four deques from the start (items, getters, putters, and the
    ``join()`` event's waiters), about 3 KiB. An unbounded queue never has putters, and
    few callers ever ``join()``; this one keeps an empty stand-in for the putters (a real
    deque when ``maxsize`` bounds it) and makes the ``join()`` event on first use. Same
    behaviour as ``asyncio.Queue``, and the same methods (none of ``put``/``get`` is
    wrapped, so a delta costs what it costs on a plain queue).
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        if maxsize <= 0:
            self._putters: Any = _NO_WAITERS
        self._finished: Any = _Finished()
