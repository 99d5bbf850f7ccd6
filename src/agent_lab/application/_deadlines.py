"""The wall-time limits of the turns running on one event loop, behind one timer.

A turn's limit (``TurnLimits.max_seconds``) used to be a timer of its own: a timer
handle and a bound method per live turn for the collector to walk, and, once the turn
ended, a cancelled handle left in the loop's heap until the loop swept it. Here every
turn of a loop is an entry in one dict, and one timer is due at the earliest deadline;
when it fires it expires the turns that are due and waits for the next earliest.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import weakref
from typing import Protocol

_TIMER_CONTEXT = contextvars.Context()
"""Where the timer runs (it only cancels tasks): one shared empty context."""


class Expiring(Protocol):
    def expire_turn(self) -> None:
        """The turn's time is up: stop it."""


class TurnDeadlines:
    """Deadlines (``loop.time()`` readings) of the running turns of one loop."""

    __slots__ = ("_due", "_handle", "_loop", "_next")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[Expiring, float] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._next = math.inf

    def add(self, turn: Expiring, seconds: float) -> None:
        """``turn.expire_turn()`` is called ``seconds`` from now unless removed first."""
        deadline = self._loop.time() + seconds
        self._due[turn] = deadline
        if deadline < self._next:
            self._schedule(deadline)

    def remove(self, turn: Expiring) -> None:
        self._due.pop(turn, None)
        if not self._due and self._handle is not None:
            self._handle.cancel()
            self._handle, self._next = None, math.inf

    def _schedule(self, deadline: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._next = deadline
        self._handle = self._loop.call_at(deadline, self._fire, context=_TIMER_CONTEXT)

    def _fire(self) -> None:
        self._handle, self._next = None, math.inf
        now = self._loop.time()
        expired = [turn for turn, deadline in self._due.items() if deadline <= now]
        for turn in expired:
            del self._due[turn]
        if self._due:
            self._schedule(min(self._due.values()))
        for turn in expired:
            turn.expire_turn()


_DEADLINES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnDeadlines] = (
    weakref.WeakKeyDictionary()
)


def deadlines_for(loop: asyncio.AbstractEventLoop) -> TurnDeadlines:
    """The deadlines of ``loop``, made on first use."""
    deadlines = _DEADLINES.get(loop)
    if deadlines is None:
        deadlines = _DEADLINES[loop] = TurnDeadlines(loop)
    return deadlines
