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

import dataclasses
import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Final

from agent_lab.domain.errors import SessionBusy
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.sqlite.journal import abandon, pending_batch_ids
from agent_lab.infrastructure.sqlite.records import (
    check_positive,
    claim_with_wait,
    new_id,
    now_iso,
)
from agent_lab.infrastructure.sqlite.rows import require_session

CLAIM_POLL_SECONDS: Final = 0.05
HOSTNAME: Final = socket.gethostname()


class ClaimsRole(StoreCore):
    """Leased, fenced writer claims."""

    def claim_session(
        self,
        session_id: str,
        owner: str,
        *,
        lease_seconds: float = 30.0,
        wait_seconds: float = 0.0,
    ) -> str:
        """Become the one runtime that drives the session; return the claim token.

        A claim held by another token blocks until it expires, unless its process is
        known to be dead (same host, pid gone), in which case it is taken over at once.
        Taking a session cancels the tool batches a previous runtime left pending. From
        now on this store's writes to the session are fenced by the token.

        Args:
            session_id: The session.
            owner: A label for the claimant, shown to whoever is refused.
            lease_seconds: How long the claim lasts without ``renew_claim``.
            wait_seconds: How long to wait for a busy session before giving up.

        Raises:
            SessionBusy: another live runtime still holds the session.
            SessionNotFound: no session has that id.
        """
        check_positive(lease_seconds, "lease_seconds")
        return claim_with_wait(
            lambda: self._try_claim(session_id, owner, lease_seconds),
            session_id,
            wait_seconds,
            CLAIM_POLL_SECONDS,
        )

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
            if claim is not None and not claim_is_stale(claim, now):
                return None, claim.describe(now)
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


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    token: str
    owner: str
    pid: int
    pid_started: str | None
    hostname: str
    expires_at: float

    def describe(self, now: float) -> str:
        left = max(0.0, self.expires_at - now)
        return f"{self.owner}, pid {self.pid} on {self.hostname}, lease ends in {left:.0f} s"


def select_claim(conn: sqlite3.Connection, session_id: str) -> Claim | None:
    row = conn.execute(
        "SELECT token, owner, pid, pid_started, hostname, expires_at FROM session_claims"
        " WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return None if row is None else Claim(*row)


def lost_claim_holder(claim: Claim | None) -> str:
    if claim is None:
        return "nobody holds it now: the claim was released or taken over"
    return f"it is held by {claim.describe(time.time())}"


def claim_is_stale(claim: Claim, now: float) -> bool:
    if claim.expires_at <= now:
        return True
    return claim.hostname == HOSTNAME and not process_alive(claim.pid, claim.pid_started)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name (state is field 3 overall).
    return stat.rpartition(")")[2].split()


def process_started(pid: int) -> str | None:
    """The process start time from ``/proc`` (Linux), to tell a reused pid apart."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


_OWN_START: dict[int, str | None] = {}
"""This process's start time by pid (a forked child has a pid of its own)."""


def own_process_started(pid: int) -> str | None:
    """``process_started`` of this process, read from ``/proc`` once per pid."""
    if pid not in _OWN_START:
        _OWN_START.clear()
        _OWN_START[pid] = process_started(pid)
    return _OWN_START[pid]


def process_alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` on this host is still the live process that made the claim."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    fields = _stat_fields(pid)
    if fields and fields[0] in {"Z", "X"}:
        return False  # killed, waiting to be reaped
    current = fields[19] if fields is not None and len(fields) > 19 else None
    return started is None or current is None or current == started
