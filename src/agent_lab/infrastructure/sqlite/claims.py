"""The ``SessionClaims`` role of the SQLite store: one writer per session, fenced.

A claim is a row in ``session_claims`` with a random token, the claimant's pid (and its
start time, to tell a reused pid apart), its host and a lease. A claim whose lease ran
out, or whose process is known to be dead (same host, pid gone or a zombie), is taken
over at once. The store remembers the tokens it was issued; every later write of that
store to the session checks, in its own transaction, that the token still holds the
claim (``StoreCore.fence``), so a runtime that lost its claim, for example after being
stopped past its lease, fails with ``PersistenceFailed("taken_over")`` and never
touches the new owner's rows. ``renew_claim`` of a lost claim raises ``SessionBusy``
naming the new holder.
"""

from __future__ import annotations

import os
import sqlite3
import time

from agent_lab.domain.errors import SessionBusy
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.sqlite.journal import abandon, pending_batch_ids
from agent_lab.infrastructure.sqlite.records import check_positive, new_id, now_iso
from agent_lab.infrastructure.sqlite.rows import require_session
from agent_lab.infrastructure.store_common.claims import (
    HOSTNAME,
    Claim,
    ClaimWaiting,
    lost_claim_holder,
    own_process_started,
    refusal,
)


class ClaimsRole(StoreCore, ClaimWaiting):
    """Leased, fenced writer claims."""

    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None:
        """Extend the claim's lease (the claimant's heartbeat).

        Raises:
            SessionBusy: the token no longer holds the claim (another runtime took the
                session over, or it was released); the message says who holds it now.
                This store's writes to the session fail as ``taken_over`` from then on.
        """
        check_positive(lease_seconds, "lease_seconds")
        with self._write() as conn:
            require_session(conn, session_id)
            updated = conn.execute(
                "UPDATE session_claims SET expires_at = ? WHERE session_id = ? AND token = ?",
                (time.time() + lease_seconds, session_id, token),
            )
            if updated.rowcount == 0:
                claim = select_claim(conn, session_id)
                raise SessionBusy(session_id, f"this claim was lost; {lost_claim_holder(claim)}")

    def release_claim(self, session_id: str, token: str) -> None:
        """Give the session up; does nothing when ``token`` no longer holds it."""
        with self._write() as conn:
            require_session(conn, session_id)
            conn.execute(
                "DELETE FROM session_claims WHERE session_id = ? AND token = ?",
                (session_id, token),
            )
        self._after_commit(lambda: self._forget_token(session_id, token))

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        pid = os.getpid()
        started = own_process_started(pid)
        with self._write() as conn:
            require_session(conn, session_id)
            claim = select_claim(conn, session_id)
            now = time.time()
            holder = refusal(claim, now)
            if holder is not None:
                return None, holder
            token = new_id()
            conn.execute(
                "INSERT OR REPLACE INTO session_claims (session_id, token, owner, pid,"
                " pid_started, hostname, claimed_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, token, owner, pid, started, HOSTNAME, now) + (now + lease_seconds,),
            )
            abandon(conn, pending_batch_ids(conn, session_id), "cancelled", now_iso())
        self._after_commit(lambda: self._tokens.__setitem__(session_id, token))
        return token, ""

    def _forget_token(self, session_id: str, token: str) -> None:
        if self._tokens.get(session_id) == token:
            del self._tokens[session_id]


def select_claim(conn: sqlite3.Connection, session_id: str) -> Claim | None:
    row = conn.execute(
        "SELECT token, owner, pid, pid_started, hostname, expires_at FROM session_claims"
        " WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return None if row is None else Claim(*row)
