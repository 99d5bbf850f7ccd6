"""Writer claims: the rules both stores decide a claim by.

A claim is a row with a random token, the claimant's pid (and its start time, to tell a
reused pid apart), its host and a lease. A claim whose lease ran out, or whose process
is known to be dead (same host, pid gone or a zombie), is taken over at once. The stores
read and write the row under their own locking (``_claim_lock``); ``SharedClaims``
renews and releases a claim the same way for both, and ``claim_session`` retries their
``_try_claim`` until it wins or the wait runs out.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from agent_lab.domain.errors import SessionBusy, SessionNotFound
from agent_lab.infrastructure.sqlite.records import check_positive, claim_with_wait
from agent_lab.infrastructure.store_common.batches import BatchStatements

CLAIM_POLL_SECONDS: Final = 0.05
HOSTNAME: Final = socket.gethostname()


class SharedClaims(BatchStatements):
    """Leased, fenced writer claims over a store's ``_try_claim`` (one attempt in one
    transaction), ``_claim_lock`` and ``_forget_token``."""

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

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        """One attempt: ``(token, "")`` when claimed, else ``(None, holder description)``."""
        raise NotImplementedError

    def _claim_lock(self, conn: Any, session_id: str) -> None:
        """Serialise with other claimants of the session, which must exist.

        Raises:
            SessionNotFound: no session has that id.
        """
        raise NotImplementedError

    def _forget_token(self, session_id: str, token: str) -> None:
        """Stop fencing the session's writes with ``token`` (if this store still holds it)."""
        raise NotImplementedError

    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None:
        """Extend the claim's lease (the claimant's heartbeat).

        Raises:
            SessionBusy: the token no longer holds the claim (another runtime took the
                session over, or it was released); the message says who holds it now.
                This store's writes to the session fail as ``taken_over`` from then on.
        """
        check_positive(lease_seconds, "lease_seconds")
        with self._write() as conn:
            self._claim_lock(conn, session_id)
            updated = conn.execute(
                self._sql(
                    "UPDATE session_claims SET expires_at = ? WHERE session_id = ? AND token = ?"
                ),
                (time.time() + lease_seconds, session_id, token),
            )
            if updated.rowcount == 0:
                claim = self._select_claim(conn, session_id)
                raise SessionBusy(session_id, f"this claim was lost; {lost_claim_holder(claim)}")

    def release_claim(self, session_id: str, token: str) -> None:
        """Give the session up; does nothing when ``token`` no longer holds it."""
        try:
            with self._write() as conn:
                self._claim_lock(conn, session_id)
                conn.execute(
                    self._sql("DELETE FROM session_claims WHERE session_id = ? AND token = ?"),
                    (session_id, token),
                )
        except SessionNotFound:
            self._forget_token(session_id, token)  # deleted under the claim
            raise
        self._after_commit(lambda: self._forget_token(session_id, token))

    def live_claims(self) -> dict[str, str]:
        """The sessions a live runtime holds now (in any process using this store), each
        with who holds it; expired claims and those of dead processes are left out."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session_id, token, owner, pid, pid_started, hostname, expires_at"
                " FROM session_claims"
            ).fetchall()
        now = time.time()
        claims = {str(row[0]): Claim(*row[1:]) for row in rows}
        return {
            session_id: claim.describe(now)
            for session_id, claim in claims.items()
            if not claim_is_stale(claim, now)
        }

    def _refused(self, conn: Any, session_id: str, now: float) -> str | None:
        """Who keeps the session from being claimed now, or ``None`` when it can be taken."""
        return refusal(self._select_claim(conn, session_id), now)

    def _select_claim(self, conn: Any, session_id: str) -> Claim | None:
        return select_claim(conn, self._sql, session_id)


def select_claim(conn: Any, sql: Callable[[str], str], session_id: str) -> Claim | None:
    """The session's claim row, if any (``sql``: the store's parameter style)."""
    row = conn.execute(
        sql(
            "SELECT token, owner, pid, pid_started, hostname, expires_at FROM session_claims"
            " WHERE session_id = ?"
        ),
        (session_id,),
    ).fetchone()
    return None if row is None else Claim(*row)


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


def refusal(claim: Claim | None, now: float) -> str | None:
    """Who keeps the session from being claimed now, or ``None`` when it can be taken."""
    if claim is not None and not claim_is_stale(claim, now):
        return claim.describe(now)
    return None


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
