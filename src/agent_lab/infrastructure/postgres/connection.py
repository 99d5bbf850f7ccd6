"""Connecting to the PostgreSQL server, and the guarded transactions every method runs in.

``PgCore`` owns one connection (autocommit off between transactions: each method opens
its own with ``conn.transaction()``) and a lock, so one store can be shared by many
sessions and called from worker threads, like the SQLite store. Each write:

1. takes the session's row lock (``SELECT ... FOR UPDATE`` on ``sessions``), which
   serialises every write to one session across processes and hosts and makes the
   claim check below race-free: a takeover (``claim_session``) takes the same lock;
2. checks the claim fence: the token (and epoch) this store was issued must still be
   the session's claim, else ``PersistenceFailed("taken_over")`` and nothing commits;
3. runs the method's statements and commits; any failure rolls everything back.

Lock waits are bounded by ``lock_timeout`` (``busy_timeout_ms``). As in the SQLite
store a held lock is waited for once: the next write within the same budget uses a
1 ms ``lock_timeout`` and fails at once as ``locked`` when the lock is still held.

A lost connection (server restart, network cut, backend terminated) fails the write in
flight as ``connection_lost``; the next call opens a new connection, so a session stays
open and its next turn tries again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Final

import psycopg
from psycopg.rows import TupleRow

from agent_lab.domain.errors import PersistenceFailed, SessionNotFound, UsageError
from agent_lab.infrastructure.postgres.errors import map_pg_errors
from agent_lab.infrastructure.postgres.schema import migrate
from agent_lab.infrastructure.sqlite.blobs import BlobCache
from agent_lab.infrastructure.sqlite.errors import deleted_under_claim

Conn = psycopg.Connection[TupleRow]

_APPLICATION_NAME: Final = "agent-lab"


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<invalid database URL>"
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    return f"postgresql://{params.get('user') or ''}@{host}:{port}/{params.get('dbname') or ''}"


class PgCore:
    """The connection, its lock, and the transaction helpers of the PostgreSQL store."""

    def __init__(self, url: str, *, busy_timeout_ms: int, connect_timeout_s: float) -> None:
        if busy_timeout_ms < 1:
            raise UsageError(f"busy_timeout_ms must be >= 1, not {busy_timeout_ms}")
        self._url = url
        self._where = redacted(url)
        self._busy_timeout_ms = busy_timeout_ms
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[str, int]] = {}
        """Claim tokens and epochs this store holds, by session: its writes are fenced."""
        self._known_blobs: dict[str, BlobCache] = {}
        self._lock_failed_at: float | None = None
        self._closed = False
        self._conn: Conn | None = None
        with map_pg_errors():
            self._conn = self._open()
            migrate(self._conn, self._where)

    def _open(self) -> Conn:
        conn = psycopg.connect(
            self._url,
            autocommit=True,
            connect_timeout=max(1, int(self._connect_timeout_s)),
            application_name=_APPLICATION_NAME,
        )
        conn.execute(f"SET lock_timeout = '{int(self._busy_timeout_ms)}ms'")
        return conn

    def close(self) -> None:
        """Close the connection; later calls raise ``UsageError``. Idempotent."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with suppress(psycopg.Error):
                    conn.close()

    def _connection(self) -> Conn:
        if self._closed:
            raise UsageError(f"the session store {self._where} is closed")
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._conn = None
            if conn is not None:
                with suppress(psycopg.Error):
                    conn.close()
            conn = self._conn = self._open()
        return conn

    # ------------------------------------------------------------- fencing

    def fence(self, conn: Conn, session_id: str) -> bool:
        """Lock the session's row and refuse the write when this store's claim was lost.

        Returns whether the session exists. Sessions this store never claimed (or
        released) are not fenced.

        Raises:
            PersistenceFailed: ``taken_over``, naming the new holder; ``deleted``: this
                store claimed the session and something deleted it meanwhile.
        """
        exists = conn.execute(
            "SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,)
        ).fetchone()
        held = self._tokens.get(session_id)
        if held is not None and exists is None:  # deleted under this store's claim
            raise deleted_under_claim(session_id)
        if held is None or exists is None:
            return exists is not None
        row = conn.execute(
            "SELECT token, epoch, owner, pid, hostname FROM session_claims WHERE session_id = %s",
            (session_id,),
        ).fetchone()
        if row is not None and (row[0], row[1]) == held:
            return True
        holder = "nobody" if row is None else f"{row[2]} (pid {row[3]} on {row[4]})"
        raise PersistenceFailed(
            "taken_over",
            f"session {session_id!r} is now held by {holder}; nothing was written",
        )

    def writable(self, conn: Conn, session_id: str) -> None:
        """Check, inside a write, that the session exists and this store may write it.

        Raises:
            SessionNotFound: no session has that id.
            PersistenceFailed: ``taken_over`` (see ``fence``).
        """
        if not self.fence(conn, session_id):
            raise SessionNotFound(session_id)

    # -------------------------------------------------------- transactions

    def _after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the write just made is durable: every write here commits
        on its own, so now."""
        action()

    @contextmanager
    def _write(self) -> Iterator[Conn]:
        with self._lock, self._mapped():
            conn = self._connection()
            with conn.transaction():
                self._limit_lock_wait(conn)
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Conn]:
        with self._lock, self._mapped():
            conn = self._connection()
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield conn

    def _limit_lock_wait(self, conn: Conn) -> None:
        failed_at = self._lock_failed_at
        budget = self._busy_timeout_ms / 1000
        if failed_at is not None and time.monotonic() - failed_at < budget:
            conn.execute("SET LOCAL lock_timeout = '1ms'")
        else:
            self._lock_failed_at = None

    @contextmanager
    def _mapped(self) -> Iterator[None]:
        try:
            with map_pg_errors():
                yield
        except PersistenceFailed as exc:
            if exc.reason == "locked":
                if self._lock_failed_at is not None:
                    raise PersistenceFailed(
                        "locked",
                        "another writer still holds the lock; this store waited "
                        f"{self._busy_timeout_ms} ms for it a moment ago and does not wait "
                        "again",
                    ) from exc
                self._lock_failed_at = time.monotonic()
            raise
