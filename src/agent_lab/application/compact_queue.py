"""``CompactQueue``: an ``asyncio.Queue`` that allocates what it rarely needs only when needed."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

T = TypeVar("T")

_NO_WAITERS: tuple[()] = ()
"""Stands in for the putters of an unbounded queue: nobody ever waits to put."""


class _NobodyJoins:
    """Stands in for ``asyncio.Queue``'s "all items processed" event while nobody
    ``join()``s: ``put`` clears it and ``task_done`` sets it, both for nothing. One
    instance serves every queue; ``CompactQueue.join`` swaps in a real event."""

    __slots__ = ()

    def set(self) -> None:
        return None

    def clear(self) -> None:
        return None


_NOBODY_JOINS = _NobodyJoins()


class CompactQueue(asyncio.Queue[T]):
    """An ``asyncio.Queue`` that allocates what an unbounded queue rarely needs only
    when it is needed.

    A plain queue holds four deques from the start (items, getters, putters, and the
    ``join()`` event's waiters), about 3 KiB, and five objects the collector tracks. An
    unbounded queue never has putters, and few callers ever ``join()``; this one keeps
    an empty stand-in for the putters (a real deque when ``maxsize`` bounds it) and a
    shared stand-in for the ``join()`` event until someone joins. Same behaviour as
    ``asyncio.Queue``, and the same methods (none of ``put``/``get`` is wrapped, so a
    delta costs what it costs on a plain queue).
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        if maxsize <= 0:
            self._putters: Any = _NO_WAITERS
        self._finished: Any = _NOBODY_JOINS

    async def join(self) -> None:
        """Block until every item put has been marked done with ``task_done()``."""
        if self._unfinished_tasks > 0:  # type: ignore[attr-defined]  # asyncio.Queue's count
            if self._finished is _NOBODY_JOINS:
                self._finished = asyncio.Event()  # not set: items are unfinished
            await self._finished.wait()
