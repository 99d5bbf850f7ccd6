"""``CompactQueue``: an ``asyncio.Queue`` that allocates what it rarely needs only when
needed; ``SparseQueue``: one that holds no deque at all while it is empty and nobody
waits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("agent_lab.application.runtime")

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
    ``asyncio.Queue``. ``put``/``put_nowait``/``get``/``get_nowait`` are its own
    steps written out in one method each (no ``full()`` or ``empty()`` call per
    item, and a wake-up call only when someone waits): a queue carries every delta and audit of a
    session, and the calls were a quarter of a session's Python calls.

    An item can be completed when it is taken (``complete_when_taken``): the runtime
    fills in the decoded raw chunks of a response audit then, in the consumer's step,
    so they live only as long as the consumer keeps the message, not for as long as
    the message waits in the queue.
    """

    _maxsize: int  # asyncio.Queue's own state, which these methods use directly
    _queue: Any
    _getters: Any
    _unfinished_tasks: int
    _completions: dict[int, Callable[[], object]] | None = None
    """What completes each waiting item that has something left to do, by ``id``."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        if maxsize <= 0:
            self._putters: Any = _NO_WAITERS
        self._finished: Any = _NOBODY_JOINS

    async def put(self, item: T) -> None:
        """Put an item into the queue; waits for a free slot only when ``maxsize`` bounds it."""
        if self._maxsize > 0:
            await super().put(item)
        else:
            self.put_nowait(item)

    def put_nowait(self, item: T) -> None:
        """Put an item into the queue without blocking (``QueueFull`` when bounded and full).

        ``asyncio.Queue``'s steps inline: the item, the unfinished count, the ``join()``
        event cleared, the first getter still waiting woken."""
        if self._maxsize > 0 and self.qsize() >= self._maxsize:
            raise asyncio.QueueFull
        self._put(item)
        self._unfinished_tasks += 1
        finished = self._finished
        if finished is not _NOBODY_JOINS:
            finished.clear()
        if self._getters:
            _wake_first(self._getters)

    async def get(self) -> T:
        """Remove and return an item, waiting until one is available (``asyncio.Queue``'s
        wait, in this frame: no second coroutine per wait)."""
        while not self._queue:
            getter = self._get_loop().create_future()  # type: ignore[attr-defined]
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()  # in case it is not done yet
                with contextlib.suppress(ValueError):  # a put may have removed it already
                    self._getters.remove(getter)
                if self._queue and not getter.cancelled():
                    self._wakeup_next(self._getters)  # type: ignore[attr-defined]  # pass it on
                raise
        return self.get_nowait()

    def get_nowait(self) -> T:
        """Remove and return an item if one is available, else raise ``QueueEmpty``."""
        if not self._queue:
            raise asyncio.QueueEmpty
        item = self._get()
        if self._putters:
            _wake_first(self._putters)
        return item

    async def join(self) -> None:
        """Block until every item put has been marked done with ``task_done()``."""
        if self._unfinished_tasks > 0:
            if self._finished is _NOBODY_JOINS:
                self._finished = asyncio.Event()  # not set: items are unfinished
            await self._finished.wait()

    def complete_when_taken(self, item: T, complete: Callable[[], object]) -> None:
        """Call ``complete()`` when ``item``, put next, is taken, just before it is
        handed out (``get`` or ``get_nowait``); ``forget_completion`` if it is not put."""
        if self._completions is None:
            self._completions = {}
        self._completions[id(item)] = complete

    def forget_completion(self, item: T) -> None:
        if self._completions is not None:
            self._completions.pop(id(item), None)

    def _get(self) -> T:
        item: T = self._queue.popleft()
        return self._completed(item) if self._completions else item

    def _completed(self, item: T) -> T:
        """``item``, taken: completed first if ``complete_when_taken`` asked for it."""
        assert self._completions is not None
        complete = self._completions.pop(id(item), None)
        if complete is not None:
            _run(complete)
        return item


def _run(complete: Callable[[], object]) -> None:
    try:
        complete()
    except Exception:  # the item still goes out, as it is
        logger.exception("completing a queued output failed")


_NO_ITEMS: tuple[()] = ()
"""Stands in for the items of an empty ``SparseQueue``."""


class SparseQueue(CompactQueue[T]):
    """A ``CompactQueue`` for queues that are empty most of the time, such as a
    session's input: while nothing is queued and nobody waits it holds no deque (a
    deque is about 0.7 KiB and an object the collector tracks); the items' deque is
    made by the first ``put`` and the waiters' by the first ``get`` that has to wait,
    and each is dropped once empty again.

    Same behaviour as ``asyncio.Queue``; ``get`` is its own (the waiters' deque may come
    and go while it waits), so it costs a little more per call: meant for queues of a
    few items per turn, not for a stream of deltas."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._getters: Any = _NO_WAITERS

    def _init(self, maxsize: int) -> None:
        self._queue: Any = _NO_ITEMS

    def _put(self, item: T) -> None:
        if self._queue is _NO_ITEMS:
            self._queue = deque()
        self._queue.append(item)

    def _get(self) -> T:
        queue = self._queue
        item: T = queue.popleft()
        if not queue:
            self._queue = _NO_ITEMS
        return self._completed(item) if self._completions else item

    async def get(self) -> T:
        """Remove and return an item, waiting until one is available."""
        while self.empty():
            getters = self._getters
            if getters is _NO_WAITERS:
                getters = self._getters = deque()
            getter = self._get_loop().create_future()  # type: ignore[attr-defined]
            getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()  # in case it is not done yet
                if getter in self._getters:
                    self._getters.remove(getter)
                if not self.empty() and not getter.cancelled():
                    self._wakeup_next(self._getters)  # type: ignore[attr-defined]
                if not self._getters:
                    self._getters = _NO_WAITERS
                raise
        if not self._getters:
            self._getters = _NO_WAITERS
        return self.get_nowait()


def _wake_first(waiters: deque[asyncio.Future[None]]) -> None:
    """Wake the first waiter still waiting (``asyncio.Queue``'s ``_wakeup_next``)."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return
