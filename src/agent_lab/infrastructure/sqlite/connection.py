"""The guarded transactions every store method runs in (opening the file: ``opening``).

``StoreCore`` owns the one connection and its lock. Each write runs in ``_write()``:
``BEGIN IMMEDIATE`` (waiting up to ``busy_timeout_ms`` for another writer), the
method's statements, the claim fence (``fence``), a check that the file at the store's
path is still the file it opened, then ``COMMIT``. Any failure rolls everything back.

``atomic_writes()`` groups the writes one thread makes inside it into one transaction
(one ``BEGIN IMMEDIATE``, one identity check, one ``COMMIT``), all or nothing: any
failed write inside rolls the whole group back. What a write remembers in memory once
it is durable (known audit blobs, claim tokens) is kept only when the group commits
(``_after_commit``).

Three rules keep failures honest:

* **One wait for a held lock.** After a write gave up on a held lock, the next write
  within the same ``busy_timeout`` does not wait again: it fails at once as ``locked``
  when the lock is still held, so a failing turn surfaces after one wait, not two
  (``locking``).
* **A replaced file is noticed.** The store remembers the device and inode of its file;
  a write to a file that was deleted or replaced underneath fails as ``file_replaced``
  instead of committing into a file nobody will ever open again. The first such write
  (never one on the event loop: ``write_now`` hands it to the worker thread), or the
  store's ``close()``, saves what the store holds to a copy and keeps its stale log off
  the new file (``replaced``); the error names the copy.
* **Corruption is confirmed.** A write or read that SQLite reports as corrupt is
  checked with ``PRAGMA quick_check`` on a fresh connection; when the file is sound
  (e.g. after a transient disk I/O error left the connection confused) the connection
  is reopened and the failure reads as ``unknown``, not ``corrupt``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Final

from agent_lab.domain.errors import PersistenceFailed, UsageError
from agent_lab.infrastructure.sqlite.blobs import BlobCache
from agent_lab.infrastructure.sqlite.errors import (
    deleted_under_claim,
    map_sqlite_errors,
    persistence_failed,
    taken_over,
)
from agent_lab.infrastructure.sqlite.group import Group
from agent_lab.infrastructure.sqlite.locking import LockWaits
from agent_lab.infrastructure.sqlite.opening import (
    MEMORY,
    Options,
    Synchronous,
    open_connection,
    writes_now,
)
from agent_lab.infrastructure.sqlite.reading import damage
from agent_lab.infrastructure.sqlite.replaced import Replaced, identity, rescue
from agent_lab.infrastructure.sqlite.rows import require_session
from agent_lab.infrastructure.sqlite.schema import rollback_quietly

__all__ = ["MEMORY", "Options", "StoreCore", "Synchronous"]

log = logging.getLogger(__name__)

CHECKPOINT_COMMITS: Final = 100
"""Commits between this store's own WAL checkpoints (SQLite's default is every 1,000
WAL pages; a session's commit is a few pages)."""


class StoreCore:
    """The connection, its lock, and the transaction helpers of the SQLite store."""

    def __init__(self, path: str | os.PathLike[str], options: Options) -> None:
        options.validate()
        self._memory = str(path) == MEMORY
        self._path = Path(path) if self._memory else Path(path).expanduser()
        self._options = options
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}
        """Claim tokens this store holds, by session: its writes there are fenced."""
        self._known_blobs: dict[str, BlobCache] = {}
        """Audit values known to be stored, by session (see ``blobs``)."""
        self._waits = LockWaits(options.busy_timeout_ms)
        """The one wait for a held lock (``locking``)."""
        self._group: Group | None = None
        """The ``atomic_writes()`` block in progress, if any."""
        self._conn: sqlite3.Connection | None = open_connection(self._path, options)
        self._identity = None if self._memory else identity(self._path)
        self._replaced: Replaced | None = None
        """Set once a write found the file at the path replaced (see ``replaced``)."""
        self._writes_now = writes_now(options, self._memory)
        """Short writes may run on the caller's thread (``write_now``)."""
        self._own_checkpoints = self._writes_now and not self._memory
        """The connection does not checkpoint by itself: the waiting paths do."""
        self._unchecked_commits = 0
        """Commits since this store's last checkpoint (``_own_checkpoints`` only)."""
        self._now = False
        """A ``write_now`` is in progress: failures are only mapped (see ``_mapped``)."""

    def close(self) -> None:
        """Close the connection; later calls raise ``UsageError``. Idempotent.

        When the file at the path is no longer the one this store opened, what the store
        holds is saved first (``replaced`` names the copy; so does an ``INFO`` log line).
        """
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            if self._keep_if_replaced(conn):
                assert self._replaced is not None
                log.info("%s", self._replaced.failure().detail)
            with map_sqlite_errors():
                conn.close()

    def check_file(self) -> Replaced | None:
        """Whether the file at the path is still the one this store opened; when it is
        not, save what the store holds first (``replaced``). Blocking: call it from a
        worker thread. ``None``: the file is the store's (or it is in memory)."""
        with self._lock:
            if self._conn is not None:
                self._keep_if_replaced(self._conn)
            return self._replaced

    def _keep_if_replaced(self, conn: sqlite3.Connection) -> bool:
        """Save what the store holds when its file was replaced (once); whether it did."""
        if self._replaced is not None or not self._file_was_replaced():
            return False
        self._replaced = rescue(conn, self._path)
        return True

    @property
    def replaced(self) -> Replaced | None:
        """What happened to the file at the path, once a write or ``close()`` found it
        deleted or replaced (where the store's data went: ``Replaced.copy``)."""
        return self._replaced

    def _file_was_replaced(self) -> bool:
        if self._identity is None or self._options.read_only:
            return False
        return identity(self._path) != self._identity

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise UsageError(f"the session store {str(self._path)!r} is closed")
        return self._conn

    def fence(self, conn: sqlite3.Connection, session_id: str) -> None:
        """Refuse the write when this store's claim on ``session_id`` was taken over.

        Sessions this store never claimed (or released) are not fenced.

        Raises:
            PersistenceFailed: ``taken_over``, naming the new holder.
        """
        token = self._tokens.get(session_id)
        if token is None:
            return
        row = conn.execute(
            "SELECT token, owner, pid, hostname FROM session_claims WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is not None and row[0] == token:
            return
        raise taken_over(session_id, None if row is None else row[1:])

    def writable(self, conn: sqlite3.Connection, session_id: str) -> None:
        """Check, inside a write, that the session exists and this store may write it
        (one lookup for both when the store holds a claim on it).

        Raises:
            SessionNotFound: no session has that id.
            PersistenceFailed: ``taken_over`` (see ``fence``), or ``deleted``: this
                store claimed the session and something deleted it meanwhile.
        """
        group = self._group if self._grouped() else None
        if group is not None and session_id in group.writable:
            return  # checked earlier in this transaction, which holds the write lock
        token = self._tokens.get(session_id)
        if token is None:
            require_session(conn, session_id)
        else:
            self._check_claim(conn, session_id, token)
        if group is not None:
            group.writable.add(session_id)

    def _check_claim(self, conn: sqlite3.Connection, session_id: str, token: str) -> None:
        row = conn.execute(
            "SELECT c.token, c.owner, c.pid, c.hostname FROM sessions AS s"
            " LEFT JOIN session_claims AS c ON c.session_id = s.id WHERE s.id = ?",
            (session_id,),
        ).fetchone()
        if row is None:  # deleted under the claim (by a tool that writes without one)
            raise deleted_under_claim(session_id)
        if row[0] != token:
            raise taken_over(session_id, None if row[0] is None else row[1:])

    def _created_now(self, session_id: str) -> None:
        """Note, for the rest of this ``atomic_writes()`` block, that it inserted the
        session: rows that need one (a claim, batches) cannot exist for it yet."""
        if self._grouped():
            assert self._group is not None
            self._group.created.add(session_id)

    def _created_in_group(self, session_id: str) -> bool:
        """Whether this ``atomic_writes()`` block inserted the session (``_created_now``)."""
        group = self._group
        return group is not None and self._grouped() and session_id in group.created

    @contextmanager
    def atomic_writes(self) -> Iterator[None]:
        """Commit every write this thread makes inside the block in one transaction.

        All or nothing: an exception leaving the block rolls every write back, and so
        does a write that failed inside it even when the caller caught its error (the
        block then ends with a ``UsageError``), so no write is ever half kept. Reads
        inside see the writes made so far. Other threads wait for the block to end.
        Blocks do not nest.

        Raises:
            PersistenceFailed: the transaction could not start or commit.
            UsageError: a write inside the block failed and its error was caught.
        """
        if self._grouped():
            raise UsageError("atomic_writes() blocks do not nest")
        with self._lock, self._mapped():
            conn = self._connection()
            self._waits.begin_immediate(conn)
            group = self._group = Group(threading.get_ident())
            try:
                yield
                if group.failed:
                    raise UsageError(
                        "a write inside this atomic_writes() block failed; "
                        "the whole block was rolled back"
                    )
                self._commit(conn)
            except BaseException:
                rollback_quietly(conn)
                raise
            finally:
                self._group = None
            self._checkpoint_if_due(conn)
        for action in group.after_commit:
            action()

    def _grouped(self) -> bool:
        group = self._group
        return group is not None and group.thread == threading.get_ident()

    def _after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the write in progress is durable: now, or when the
        ``atomic_writes()`` block around it commits (never, if it rolls back)."""
        if self._grouped():
            assert self._group is not None
            self._group.after_commit.append(action)
        else:
            action()

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        group = self._group
        if group is not None and group.thread == threading.get_ident():
            return _GroupedWrite(self, group)  # every write of a ``write_now`` comes here
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write in a transaction of its own."""
        with self._lock, self._mapped():
            conn = self._connection()
            self._waits.begin_immediate(conn)
            try:
                yield conn
                self._commit(conn)
            except BaseException:
                rollback_quietly(conn)
                raise
            self._checkpoint_if_due(conn)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        if self._grouped():
            with self._mapped():
                yield self._connection()
            return
        with self._lock, self._mapped():
            conn = self._connection()
            self._waits.patient(conn)
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                rollback_quietly(conn)

    def _commit(self, conn: sqlite3.Connection) -> None:
        self._check_identity()
        conn.execute("COMMIT")
        self._unchecked_commits += 1

    def _checkpoint_due(self) -> bool:
        return self._own_checkpoints and self._unchecked_commits >= CHECKPOINT_COMMITS

    def _checkpoint_if_due(self, conn: sqlite3.Connection) -> None:
        """Copy the WAL back into the file when this store's turn has come (the
        connection's own automatic checkpoints are off: see ``write_now``). Best effort:
        the write before it is already durable, and the next due write tries again."""
        if not self._checkpoint_due():
            return
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._unchecked_commits = 0

    def _check_identity(self) -> None:
        """Refuse to commit into a file that is no longer the one at the path."""
        if self._replaced is not None:
            raise self._replaced.failure()
        if self._file_was_replaced():  # ``_fail`` saves a copy, off the event loop
            raise PersistenceFailed("file_replaced", f"{self._path} changed while open")

    @contextmanager
    def _mapped(self) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            self._fail(exc)
            raise

    def _fail(self, exc: BaseException) -> None:
        """Raise what a store call that failed with ``exc`` raises; return when that is
        ``exc`` itself. A ``sqlite3`` error becomes ``PersistenceFailed``
        (``map_sqlite_errors``); a lock given up on is remembered (one wait, see the
        module docstring); reported corruption is confirmed. Inside ``write_now`` the
        error is only mapped: the work reruns the usual way, which does the rest."""
        if isinstance(exc, sqlite3.Error):
            failure = persistence_failed(exc)
            if failure.reason == "read_only" and self._options.read_only:
                failure = PersistenceFailed(
                    "read_only", f"{self._path} is open for reading only; nothing was written"
                )
            failure.__cause__ = exc  # as ``raise failure from exc``
            self._fail(failure)
            raise failure
        if not isinstance(exc, PersistenceFailed) or self._now:
            return
        if exc.reason == "file_replaced" and self._replaced is None and self._conn is not None:
            self._replaced = rescue(self._conn, self._path)  # outside the rolled-back write
            raise self._replaced.failure() from exc
        if exc.reason == "locked":
            self._waits.gave_up()
        if exc.reason == "corrupt" and not self._memory and self._file_is_sound():
            self._reconnect()
            raise PersistenceFailed(
                "unknown",
                f"{exc.detail} (the file passes an integrity check; the connection was reset)",
            ) from exc

    def _file_is_sound(self) -> bool:
        try:
            return not damage(self._path)
        except sqlite3.Error:
            return False

    def _reconnect(self) -> None:
        old, self._conn = self._conn, None
        if old is not None:
            old.close()
        self._conn = open_connection(self._path, self._options, check_pages=False)
        self._waits.reconnected()


class _GroupedWrite:
    """One write inside an ``atomic_writes()`` block (or a ``write_now``): a failure
    dooms the block. A plain class, not a generator: it runs once per store call."""

    __slots__ = ("_group", "_store")

    def __init__(self, store: StoreCore, group: Group) -> None:
        self._store, self._group = store, group

    def __enter__(self) -> sqlite3.Connection:
        return self._store._connection()

    def __exit__(self, kind: object, exc: BaseException | None, trace: object) -> None:
        if exc is not None:
            self._group.failed = True
            self._store._fail(exc)  # raises the mapped failure, or returns: ``exc`` goes on
