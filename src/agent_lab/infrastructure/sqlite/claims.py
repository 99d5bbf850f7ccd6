"""The ``SessionClaims`` role of the SQLite store: one writer per session, fenced.

A claim is a row in ``session_claims`` with a random token, the claimant's pid (and its
start time, to tell a reused pid apart), its host and a lease. A claim whose lease ran
out, or whose process is known to be dead (same host, pid gone or a zombie), is taken
over at once. The store remembers the tokens it was issued; every later write of that
store to the session checks, in its own transaction, that the token still holds the
claim (``StoreCore.fence``), so a runtime that lost its claim, for example after being
stopped past its lease, fails with ``PersistenceFailed("taken_over")`` and never
touches the new owner's rows. ``renew_claim`` of a lost claim raises ``SessionBusy``
naming the new holder (``store_common.claims``).
"""

from __future__ import annotations

import os
import sqlite3
import time

from agent_lab.domain.errors import SessionNotFound
from agent_lab.infrastructure.sqlite.journal import SqlCore
from agent_lab.infrastructure.sqlite.records import new_id, now_iso
from agent_lab.infrastructure.sqlite.rows import require_session, session_exists
from agent_lab.infrastructure.store_common.claims import (
    HOSTNAME,
    SharedClaims,
    own_process_started,
)


class ClaimsRole(SqlCore, SharedClaims):
    """Leased, fenced writer claims, serialised by SQLite's write lock."""

    def _claim_lock(self, conn: sqlite3.Connection, session_id: str) -> None:
        require_session(conn, session_id)  # the write already holds the database lock

    def _forget_token(self, session_id: str, token: str) -> None:
        if self._tokens.get(session_id) == token:
            del self._tokens[session_id]

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        pid = os.getpid()
        started = own_process_started(pid)
        with self._write() as conn:
            now = time.time()
            new = self._created_in_group(session_id)
            if not new:  # a session this transaction made has no claim or batches yet
                require_session(conn, session_id)
                holder = self._refused(conn, session_id, now)
                if holder is not None:
                    return None, holder
            token = new_id()
            conn.execute(
                f"INSERT{'' if new else ' OR REPLACE'} INTO session_claims (session_id, token,"
                " owner, pid, pid_started, hostname, claimed_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, token, owner, pid, started, HOSTNAME, now) + (now + lease_seconds,),
            )
            if not new:
                self._cancel_pending(conn, session_id, now_iso())
        self._after_commit(lambda: self._tokens.__setitem__(session_id, token))
        return token, ""

    def release_claim(self, session_id: str, token: str) -> None:
        """Give the session up; does nothing when ``token`` no longer holds it.

        Raises:
            SessionNotFound: no session has that id.
        """
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM session_claims WHERE session_id = ? AND token = ?",
                (session_id, token),
            ).rowcount
            if not deleted and not session_exists(conn, session_id):
                self._forget_token(session_id, token)  # deleted under the claim
                raise SessionNotFound(session_id)
        self._after_commit(lambda: self._forget_token(session_id, token))
