"""Waiting for SQLite's write lock, once per held lock (the rule in ``connection``).

A write waits up to ``busy_timeout_ms`` for another writer to let go. After a write
gave up on a held lock, the next write within the same ``busy_timeout`` does not wait
again: it fails at once as ``locked`` when the lock is still held, so a failing turn
surfaces after one wait, not two. A ``write_now`` never waits (busy timeout 0); the next
waiting write sets the timeout back.
"""

from __future__ import annotations

import sqlite3
import time

from agent_lab.domain.errors import PersistenceFailed


class LockWaits:
    """The busy timeout of one store's connection and when it last gave up waiting."""

    __slots__ = ("_budget_ms", "_failed_at", "_patient")

    def __init__(self, busy_timeout_ms: float) -> None:
        self._budget_ms = int(busy_timeout_ms)
        self._failed_at: float | None = None
        self._patient = True
        """The connection's busy timeout is the budget (``impatient`` sets it to 0)."""

    def reconnected(self) -> None:
        """A new connection starts with the store's busy timeout."""
        self._patient = True

    def gave_up(self) -> None:
        """A write failed as ``locked``: the next one within the budget does not wait."""
        if self._failed_at is None:
            self._failed_at = time.monotonic()

    def patient(self, conn: sqlite3.Connection) -> None:
        """Wait up to the budget for a lock again (after an ``impatient`` write)."""
        if not self._patient:
            conn.execute(f"PRAGMA busy_timeout = {self._budget_ms}")
            self._patient = True

    def impatient(self, conn: sqlite3.Connection) -> None:
        """Do not wait for a lock at all (``write_now``)."""
        if self._patient:
            conn.execute("PRAGMA busy_timeout = 0")
            self._patient = False

    def begin_immediate(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting for the lock unless a write gave up on it within
        the budget: then it is tried once, without waiting.

        Raises:
            PersistenceFailed: ``locked``, when that one try finds the lock held.
        """
        self.patient(conn)
        budget, failed_at = self._budget_ms, self._failed_at
        if failed_at is None or time.monotonic() - failed_at >= budget / 1000:
            conn.execute("BEGIN IMMEDIATE")
            self._failed_at = None
            return
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise PersistenceFailed(
                "locked",
                f"another writer still holds the lock; this store waited {budget} ms for it "
                "a moment ago and does not wait again",
            ) from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {budget}")
        self._failed_at = None
