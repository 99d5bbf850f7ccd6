"""The writer claim a session's recorder holds: its token and its lease's renewals.

The lease is renewed every third of ``LEASE_SECONDS`` by a timer, not a task per
session; a task exists only while a renewal is being written (in the worker thread). A
renewal that finds the claim taken over (this runtime stalled past its lease) or the
session deleted under it ends the claim: the reason is kept (``lost_to``) and the task
serving the session is cancelled (``stop_on_loss``). A busy or failing store is tried
again at the next renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agent_lab.application._opening import LEASE_SECONDS
from agent_lab.application._store_access import deleted_under_claim
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import PersistenceFailed, SessionBusy, SessionNotFound, StoreError


class ClaimLease:
    """One session's claim token, renewed until ``stop()``."""

    __slots__ = ("_heartbeat", "_renewal", "_serving", "_session_id", "_store", "lost_to", "token")

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self.token: str | None = None
        """The claim's token while this runtime holds it."""
        self.lost_to: PersistenceFailed | None = None
        """Why the claim ended while held (taken over, or the session deleted)."""
        self._renewal: asyncio.TimerHandle | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        """A renewal being written, if any."""
        self._serving: asyncio.Task[Any] | None = None

    def keep_renewing(self) -> None:
        """Start the renewals of a claim just won (``token`` is set)."""
        if self.token is not None:
            loop = asyncio.get_running_loop()
            self._renewal = loop.call_later(LEASE_SECONDS / 3, self._start_renewal)

    def stop_on_loss(self, task: asyncio.Task[Any] | None) -> None:
        """Cancel ``task`` once the claim is lost (no task waits for the loss)."""
        self._serving = task

    def stop_timer(self) -> bool:
        """No further renewals; True when one is being written now (``stop`` waits)."""
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None
        return self._heartbeat is not None

    async def stop(self) -> str | None:
        """End the renewals, waiting out one being written, and hand over the token
        for its release (``None``: no claim is held any more)."""
        self.stop_timer()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        return self.take()

    def take(self) -> str | None:
        """The token, forgotten here: the caller releases it."""
        token, self.token = self.token, None
        return token

    def _start_renewal(self) -> None:
        self._renewal = None
        self._heartbeat = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        token = self.token
        if token is None:
            return
        try:
            await asyncio.to_thread(
                self._store.renew_claim, self._session_id, token, lease_seconds=LEASE_SECONDS
            )
        except (SessionBusy, SessionNotFound) as exc:
            # Either way the claim is no longer this runtime's to release.
            self.token = None
            self.lost_to = (
                PersistenceFailed("taken_over", exc.holder)
                if isinstance(exc, SessionBusy)
                else deleted_under_claim(self._session_id)
            )
            if self._serving is not None:
                self._serving.cancel()
        except StoreError:
            pass  # a busy or failing store: the next renewal tries again
        self._heartbeat = None
        self.keep_renewing()
