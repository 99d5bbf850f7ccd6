"""``SQLiteSessionStore``: the durable ``SessionStore`` on one SQLite file.

For example::

    with SQLiteSessionStore("~/.agent_lab/sessions.sqlite3") as store:
        session_id = store.create_session("hello", config={})
        token = store.claim_session(session_id, owner="cli")

**Durability.** The file is in WAL mode. With ``synchronous="NORMAL"`` (the default) a
commit survives the process crashing or being killed (``SIGKILL``) at any point, but the
last few commits can be lost if the machine loses power or the OS crashes, because the
WAL is only synced at checkpoints. ``synchronous="FULL"`` syncs the WAL on every commit,
so commits also survive power loss, at the cost of one ``fsync`` per write (see
``bench/RESULTS.md``). Either way a transaction is all or nothing: a failed multi-row
write leaves no row behind.

**Concurrency.** The store holds one connection (``check_same_thread=False``) guarded
by a lock, so it can be shared by many sessions and called from worker threads. Other
stores or processes may use the same file: write transactions start with
``BEGIN IMMEDIATE`` and wait up to ``busy_timeout_ms`` for the write lock, after which
the write fails with ``PersistenceFailed("locked")`` (once: see ``connection``). One
runtime drives a session at a time through ``claim_session`` (a leased claim that a
dead process loses at once on the same machine), and a store's writes to a session it
claimed are fenced by the claim (see ``claims``).

**Errors.** No ``sqlite3`` exception leaves this package: failures become
``PersistenceFailed`` with a ``reason`` (``locked``, ``disk_full``, ``read_only``,
``corrupt``, ``taken_over``, ``file_replaced``, ``unknown``); a file that is not a
store, or has a newer schema, raises ``StoreFormatError`` and is left unchanged, and so
is a file whose pages are damaged (``PersistenceFailed("corrupt")``: its pages are
checked before a store opened for writing writes anything; see ``reading``).

Timestamps (``created_at`` and friends) are ISO-8601 UTC strings with milliseconds;
claim expiry times are wall-clock epoch seconds.

The roles live in their own modules: ``transcript`` (sessions, turns, messages),
``metrics`` (audits, stored once through ``blobs``; call metrics), ``journal`` (tool
batches) and ``claims``; ``opening`` opens the file, ``connection`` runs the
transactions, ``write_now`` the short ones the event loop may make itself (no thread
hand-off when nothing can wait), ``schema`` migrates the file, ``reading`` opens it
for reading only and checks its pages, ``errors`` classifies failures.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_lab.infrastructure.sqlite.claims import ClaimsRole
from agent_lab.infrastructure.sqlite.journal import JournalRole
from agent_lab.infrastructure.sqlite.metrics import MetricsRole
from agent_lab.infrastructure.sqlite.opening import Options, Synchronous
from agent_lab.infrastructure.sqlite.transcript import TranscriptRole
from agent_lab.infrastructure.sqlite.write_now import WriteNowRole

__all__ = ["SQLiteSessionStore", "Synchronous"]


class SQLiteSessionStore(TranscriptRole, MetricsRole, JournalRole, ClaimsRole, WriteNowRole):
    """Sessions, turns, transcript, audits, metrics, tool journal and claims in SQLite.

    Args:
        path: The store file; missing parent directories are created.
        busy_timeout_ms: How long a write waits for another writer's lock before it
            fails with ``PersistenceFailed("locked")``.
        synchronous: ``PRAGMA synchronous``; ``NORMAL`` survives process crashes,
            ``FULL`` also survives power loss (see the module docstring).
        read_only: Open the file for reading only; every write raises
            ``PersistenceFailed("read_only")``. The file must exist and be a current
            store (it is never migrated). It is read where this user may not write it
            or its directory (``reading`` says how, and what a ``-wal`` file changes).
        max_size_bytes: Cap the file size (``PRAGMA max_page_count``); a write past the
            cap fails with ``PersistenceFailed("disk_full")`` as a full disk would.

    Raises:
        StoreFormatError: the file is not a store, belongs to another application, or
            has a newer schema; the file is left unchanged.
        PersistenceFailed: the file could not be opened or migrated (``read_only``
            when this user may not, naming the path and the cause), or its pages are
            damaged (``reason="corrupt"``; the file is left unchanged).
        UsageError: an option is out of range.
    """

    WRITES_NOW = True  # this class's own writes never block on the loop (``write_now``)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "NORMAL",
        read_only: bool = False,
        max_size_bytes: int | None = None,
    ) -> None:
        super().__init__(path, Options(busy_timeout_ms, synchronous, read_only, max_size_bytes))

    @property
    def path(self) -> Path:
        """The store file."""
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"{type(self).__name__}({str(self._path)!r}, {state})"

    def __enter__(self) -> SQLiteSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
