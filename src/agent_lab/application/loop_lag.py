"""A process-wide event-loop lag monitor: how late the loop runs what is due.

One heartbeat timer per event loop (not per session) fires every ``INTERVAL_SECONDS``
while any runtime on that loop is running; the lag of a beat is how much later than
scheduled it ran, which is how long something held the loop (a blocking call, a long
garbage collection, a burst of work). The monitor keeps the largest lag since it
started, the number of stalls over ``STALL_MS``, and the largest lag per
``BUCKET_SECONDS`` slot of the last ``HISTORY_SECONDS``, so a chat round can ask what
the worst stall during its own time span was (``chat_round_finished.loop_lag_ms``).

Cost: one timer callback per beat per process, whatever the number of sessions.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Final

INTERVAL_SECONDS: Final = 0.01
STALL_MS: Final = 20.0
BUCKET_SECONDS: Final = 0.1
HISTORY_SECONDS: Final = 600.0
_SLOTS: Final = int(HISTORY_SECONDS / BUCKET_SECONDS)


@dataclass(frozen=True)
class LoopLagStats:
    """What the monitor saw on its loop since it was first started."""

    max_ms: float
    """The largest lag of any beat."""
    stalls: int
    """Beats that ran more than ``STALL_MS`` late."""
    beats: int
    last_ms: float
    """The lag of the latest beat."""

    def as_dict(self) -> dict[str, float | int]:
        return {
            "max_ms": round(self.max_ms, 2),
            "stalls_over_20ms": self.stalls,
            "beats": self.beats,
            "last_ms": round(self.last_ms, 2),
        }


class LoopLagMonitor:
    """The heartbeat of one event loop; ``acquire()``/``release()`` by each runtime."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._users = 0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._max_s = 0.0
        self._last_s = 0.0
        self._stalls = 0
        self._beats = 0
        self._slot_lag = [0.0] * _SLOTS
        self._slot_id = [-1] * _SLOTS

    def acquire(self) -> None:
        """A runtime started: beat while anyone runs."""
        self._users += 1
        if self._handle is None:
            self._due = self._loop.time() + INTERVAL_SECONDS
            self._handle = self._loop.call_at(self._due, self._beat)

    def release(self) -> None:
        """A runtime stopped: the last one out stops the heartbeat."""
        self._users = max(0, self._users - 1)
        if self._users == 0 and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _beat(self) -> None:
        now = self._loop.time()
        lag = now - self._due
        if lag < 0.0:
            lag = 0.0
        self._beats += 1
        self._last_s = lag
        if lag > self._max_s:
            self._max_s = lag
        if lag * 1000 > STALL_MS:
            self._stalls += 1
        slot = int(now / BUCKET_SECONDS)
        index = slot % _SLOTS
        if self._slot_id[index] != slot:
            self._slot_id[index], self._slot_lag[index] = slot, lag
        elif lag > self._slot_lag[index]:
            self._slot_lag[index] = lag
        self._due = now + INTERVAL_SECONDS
        self._handle = self._loop.call_at(self._due, self._beat)

    def _overdue(self) -> float:
        """How late the pending beat already is (a stall still going on, seen from
        inside it: the beat itself runs only once the loop is free again)."""
        if self._handle is None:
            return 0.0
        return max(0.0, self._loop.time() - self._due)

    def stats(self) -> LoopLagStats:
        worst = max(self._max_s, self._overdue())
        return LoopLagStats(worst * 1000, self._stalls, self._beats, self._last_s * 1000)

    def max_between(self, start: float, end: float) -> float:
        """The largest lag (ms) of the beats between two ``loop.time()`` readings,
        to the nearest ``BUCKET_SECONDS`` slot."""
        first, last = int(start / BUCKET_SECONDS), int(end / BUCKET_SECONDS)
        first = max(first, last - _SLOTS + 1)
        worst = self._overdue()
        for slot in range(first, last + 1):
            index = slot % _SLOTS
            if self._slot_id[index] == slot and self._slot_lag[index] > worst:
                worst = self._slot_lag[index]
        return round(worst * 1000, 2)


_MONITORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLagMonitor] = (
    weakref.WeakKeyDictionary()
)


def monitor_for(loop: asyncio.AbstractEventLoop | None = None) -> LoopLagMonitor:
    """The monitor of ``loop`` (the running loop by default), made on first use."""
    loop = loop or asyncio.get_running_loop()
    monitor = _MONITORS.get(loop)
    if monitor is None:
        monitor = _MONITORS[loop] = LoopLagMonitor(loop)
    return monitor
