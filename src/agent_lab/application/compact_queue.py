"""``CompactQueue``: an ``asyncio.Queue`` that allocates its waiter bookkeeping lazily."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, TypeVar

T = TypeVar("T")

_NO_WAITERS: tuple[()] = ()
"""Stands in for a waiter deque nobody has needed yet: empty, so nothing to wake."""


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
    """An ``asyncio.Queue`` that allocates its waiter bookkeeping on first need.

    A plain queue holds four deques from the start (items, getters, putters, and the
    ``join()`` event's waiters), about 3 KiB; a session has four queues, most of them
    never waited on in a way that needs more than the items deque. Same behaviour as
    ``asyncio.Queue``; only the memory of what is never used is saved.
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._getters: Any = _NO_WAITERS
        self._putters: Any = _NO_WAITERS
        self._finished: Any = _Finished()

    async def get(self) -> T:
        if self._getters is _NO_WAITERS and self.empty():
            self._getters = deque()
        return await super().get()

    async def put(self, item: T) -> None:
        if self._putters is _NO_WAITERS and self.maxsize > 0 and self.full():
            self._putters = deque()
        await super().put(item)
