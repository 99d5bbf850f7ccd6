"""Short writes on the caller's thread, when they need no waiting (``write_now``).

The runtime hands each durable write to a worker thread so that the event loop never
waits for a lock or a disk. Most writes wait for neither: the file is in WAL mode, a
``NORMAL`` commit appends a few pages to the WAL without a sync, and nobody else holds
the write lock. For those, the trip to the thread (waking it, handing the GIL back and
forth) costs more than the write. ``write_now`` runs the write right away, on the
calling thread, **only when nothing can make it wait**:

* the store's own lock is free (no worker thread is using the store);
* ``BEGIN IMMEDIATE`` gets the file's write lock at once (busy timeout 0: a lock held
  by another connection is ``SQLITE_BUSY`` at once, not a wait);
* the commit does not sync (``synchronous`` ``OFF`` or ``NORMAL``; never read-only);
* no checkpoint is due: the connection's automatic checkpoints are off, and the store
  runs its own, every ``CHECKPOINT_COMMITS`` commits, in the next write that may wait.

Otherwise, or when anything inside fails, the transaction is rolled back and
``NotNow`` says so: nothing was written, and the caller runs the same work the usual
way (``asyncio.to_thread``), where a held lock is waited for and any failure is
classified exactly as always (``locked`` after one wait, ``disk_full``,
``read_only``, ``corrupt`` after an integrity check).

Only a class that says so in its own body (``WRITES_NOW = True``: the SQLite store and
the in-memory store) gets ``write_now``; a subclass does not inherit it, because its
overrides (of ``atomic_writes``, of a write) may block or wait in ways this module
cannot vouch for. Its writes go to the worker thread, as before.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import ClassVar, TypeVar

from agent_lab.application.session_store import NotNow
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.sqlite.group import Group
from agent_lab.infrastructure.sqlite.schema import rollback_quietly

T = TypeVar("T")


class WriteNowRole(StoreCore):
    """``write_now``: one transaction on the calling thread, or ``NotNow``."""

    WRITES_NOW: ClassVar[bool] = False
    """Set in a class's own body to give that class (not its subclasses) ``write_now``."""

    def write_now(self, work: Callable[[], T]) -> T:
        """Run ``work`` (calls of this store's writes) in one transaction, now, on this
        thread, when that needs no waiting (see the module docstring).

        Raises:
            NotNow: it would have waited, or something inside failed; nothing was
                written (the cause, if any, is chained).
        """
        if not self._may_write_now() or not self._lock.acquire(blocking=False):
            raise NotNow
        try:
            conn = self._conn
            if conn is None:
                raise NotNow
            group = self._group = Group(threading.get_ident())
            self._now = True
            try:
                result = self._run_now(conn, group, work)
            finally:
                self._group = None
                self._now = False
        finally:
            self._lock.release()
        for action in group.after_commit:
            action()
        return result

    def _may_write_now(self) -> bool:
        return (
            self._writes_now
            and type(self).__dict__.get("WRITES_NOW", False)
            and not self._checkpoint_due()
        )

    def _run_now(self, conn: sqlite3.Connection, group: Group, work: Callable[[], T]) -> T:
        try:
            self._waits.impatient(conn)
            conn.execute("BEGIN IMMEDIATE")
            result = work()
            if group.failed:  # a write failed and its error was caught: nothing is kept
                raise NotNow
            self._commit(conn)
        except Exception as exc:
            rollback_quietly(conn)
            raise NotNow from exc
        except BaseException:
            rollback_quietly(conn)
            raise
        return result
