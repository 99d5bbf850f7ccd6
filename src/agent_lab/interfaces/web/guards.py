"""Bounds on what one client may ask of the web lab: queued turns, message rate, and
which connections watch a session (so deleting it can tell them).

* ``QUEUE_LIMIT`` user turns may wait behind a running turn; more are refused with an
  error frame. Closing a session, or its last client leaving, drops the waiting ones.
* ``RateLimit`` is a token bucket per client address over the commands that cost
  something (``start`` and ``user``).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lab.interfaces.web.hub import LiveSession

QUEUE_LIMIT = 8
"""User turns that may wait behind the running one, per session."""


def queued_turns(live: LiveSession) -> int:
    """User turns submitted to ``live`` that have not started yet."""
    return len(live._pending_users)


def drop_queued(live: LiveSession) -> list[str]:
    """Drop the user turns the runtime has not taken yet; returns them, oldest first.

    The live session offers no public way to withdraw submitted input, so this reaches
    into its input queue (directly, or through its runtime session handle); the
    runtime only ever takes the next turn from that queue.
    """
    inbox = _input_queue(live)
    if inbox is None:
        return []
    waiting = [inbox.get_nowait() for _ in range(inbox.qsize())]
    if None in waiting:
        inbox.put_nowait(None)  # a close stays a close
    dropped = min(len(waiting) - waiting.count(None), len(live._pending_users))
    contents = [live._pending_users.pop() for _ in range(dropped)]
    return contents[::-1]


def _input_queue(live: LiveSession) -> asyncio.Queue[Any] | None:
    holder: Any = getattr(live, "_queues", None)
    if holder is None:
        holder = getattr(getattr(live, "_session", None), "_queues", None)
    inbox = getattr(holder, "input", None)
    return inbox if isinstance(inbox, asyncio.Queue) else None


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class RateLimit:
    """A token bucket per client: ``burst`` commands at once, ``per_second`` after."""

    burst: int = 120
    per_second: float = 30.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def allow(self, client: str) -> bool:
        """Take one token of ``client``'s bucket; ``False`` when it is empty."""
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = self._buckets[client] = _Bucket(float(self.burst), now)
            if len(self._buckets) > 10_000:  # forget the oldest clients
                self._buckets.pop(next(iter(self._buckets)))
        refill = (now - bucket.stamp) * self.per_second
        bucket.tokens = min(float(self.burst), bucket.tokens + refill)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


class Watchers:
    """Which connections show which session; ``deleted`` notifies them and remembers
    the id (the last ``remembered`` of them), so a tab that opens it later is told too."""

    def __init__(self, remembered: int = 10_000) -> None:
        self._by_session: dict[str, set[Callable[[], None]]] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._remembered = remembered

    def was_deleted(self, session_id: str) -> bool:
        """Deleted in this process and not started again since."""
        return session_id in self._gone

    def started(self, session_id: str) -> None:
        """A session with this id runs again: it is no longer a deleted one."""
        self._gone.pop(session_id, None)

    def add(self, session_id: str, on_deleted: Callable[[], None]) -> None:
        self._by_session.setdefault(session_id, set()).add(on_deleted)

    def remove(self, session_id: str, on_deleted: Callable[[], None]) -> None:
        watchers = self._by_session.get(session_id)
        if watchers is not None:
            watchers.discard(on_deleted)
            if not watchers:
                del self._by_session[session_id]

    def deleted(self, session_id: str) -> None:
        self._gone[session_id] = None
        while len(self._gone) > self._remembered:
            self._gone.popitem(last=False)
        for notify in list(self._by_session.get(session_id, ())):
            notify()
