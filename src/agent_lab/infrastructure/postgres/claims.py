"""The ``SessionClaims`` role of the PostgreSQL store: one writer per session, fenced.

A claim is a ``session_claims`` row: a random token, an epoch (the session's
``claim_epoch``, raised by one on every new claim), the claimant's owner label, pid
(with its start time), host and lease. Claiming, renewing and every write to the
session take the session's row lock first, so a takeover and a stale writer's write
are ordered: the write either commits before the takeover or sees the new token and
fails as ``taken_over``. A claim whose lease ran out, or whose process is known to be
dead (same host), is taken over at once; the rules are the SQLite store's
(``store_common.claims``).
"""

from __future__ import annotations

import os
import time

from agent_lab.domain.errors import SessionNotFound
from agent_lab.infrastructure.postgres.connection import Conn
from agent_lab.infrastructure.postgres.journal import SqlCore
from agent_lab.infrastructure.sqlite.records import new_id, now_iso
from agent_lab.infrastructure.store_common.claims import (
    HOSTNAME,
    SharedClaims,
    process_started,
)


class ClaimsRole(SqlCore, SharedClaims):
    """Leased, fenced writer claims, ordered by the session's row lock."""

    def _claim_lock(self, conn: Conn, session_id: str) -> None:
        _lock_session(conn, session_id)

    def _forget_token(self, session_id: str, token: str) -> None:
        held = self._tokens.get(session_id)
        if held is not None and held[0] == token:
            del self._tokens[session_id]

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        with self._write() as conn:
            epoch = _lock_session(conn, session_id) + 1
            now = time.time()
            holder = self._refused(conn, session_id, now)
            if holder is not None:
                return None, holder
            token = new_id()
            pid = os.getpid()
            conn.execute(
                "INSERT INTO session_claims (session_id, token, epoch, owner, pid,"
                " pid_started, hostname, claimed_at, expires_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (session_id) DO UPDATE SET token = excluded.token,"
                " epoch = excluded.epoch, owner = excluded.owner, pid = excluded.pid,"
                " pid_started = excluded.pid_started, hostname = excluded.hostname,"
                " claimed_at = excluded.claimed_at, expires_at = excluded.expires_at",
                (session_id, token, epoch, owner, pid, process_started(pid), HOSTNAME, now)
                + (now + lease_seconds,),
            )
            conn.execute("UPDATE sessions SET claim_epoch = %s WHERE id = %s", (epoch, session_id))
            self._cancel_pending(conn, session_id, now_iso())
        self._tokens[session_id] = (token, epoch)
        return token, ""


def _lock_session(conn: Conn, session_id: str) -> int:
    """Take the session's row lock; return its current claim epoch."""
    row = conn.execute(
        "SELECT claim_epoch FROM sessions WHERE id = %s FOR UPDATE", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return int(row[0])
