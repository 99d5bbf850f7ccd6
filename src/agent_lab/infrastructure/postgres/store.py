"""``PostgresSessionStore``: the durable ``SessionStore`` on a PostgreSQL database.

For example::

    with PostgresSessionStore("postgresql://lab@db.internal/agent_lab") as store:
        session_id = store.create_session("hello", config={})
        token = store.claim_session(session_id, owner="worker-1")

Use it when several processes or hosts serve one lab (``agent-lab serve --workers``,
campaigns on Ray): every one of them opens its own store on the same database.

**Durability.** Each method is one transaction: committed means durable by the
server's rules (``synchronous_commit`` on, the default, survives a server crash);
a failed multi-row write leaves no row behind.

**Concurrency.** One connection per store, guarded by a lock, like the SQLite store:
share a store between sessions of one process and call it from worker threads. Writes
to a session are serialised by the session's row lock and fenced by the claim (token
and epoch, see ``claims``), across processes and hosts.

**Errors.** No ``psycopg`` exception leaves this package: failures become
``PersistenceFailed`` with a ``reason`` (``locked``, ``disk_full``, ``read_only``,
``corrupt``, ``taken_over``, ``connection_lost``, ``unknown``, see ``errors``); a
database holding another application's tables, or a newer schema, raises
``StoreFormatError`` and is left unchanged.

The methods, their arguments and the dicts they return are the SQLite store's; the
store conformance suite (``tests/store_conformance``) runs the same tests on both.
"""

from __future__ import annotations

from agent_lab.infrastructure.postgres.claims import ClaimsRole
from agent_lab.infrastructure.postgres.connection import redacted
from agent_lab.infrastructure.postgres.journal import JournalRole
from agent_lab.infrastructure.postgres.metrics import MetricsRole
from agent_lab.infrastructure.postgres.transcript import TranscriptRole

__all__ = ["PostgresSessionStore"]


class PostgresSessionStore(TranscriptRole, MetricsRole, JournalRole, ClaimsRole):
    """Sessions, turns, transcript, audits, metrics, tool journal and claims in PostgreSQL.

    Args:
        url: A libpq connection URL or string (``postgresql://user:pw@host:5432/db``);
            ``?options=-csearch_path%3Dlab`` puts the tables in another schema.
        busy_timeout_ms: How long a write waits for a row lock (``lock_timeout``)
            before it fails with ``PersistenceFailed("locked")``.
        connect_timeout_s: How long connecting may take.

    Raises:
        StoreFormatError: the database is not a store or has a newer schema.
        PersistenceFailed: the server could not be reached (``connection_lost``) or the
            schema could not be created.
    """

    def __init__(
        self, url: str, *, busy_timeout_ms: int = 5000, connect_timeout_s: float = 10.0
    ) -> None:
        super().__init__(url, busy_timeout_ms=busy_timeout_ms, connect_timeout_s=connect_timeout_s)

    @property
    def url(self) -> str:
        """The database URL without its password."""
        return redacted(self._url)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"{type(self).__name__}({self.url!r}, {state})"

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
