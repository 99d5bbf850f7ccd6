"""Why the hub did not hand out a live session: it is live already, or its runtime
could not open it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_lab.application.protocol import ErrorMessage

if TYPE_CHECKING:
    from agent_lab.interfaces.web.hub import LiveSession

STOPPED: ErrorMessage = {
    "type": "error",
    "message": "the session stopped before its runtime opened it",
    "failure_reason": "cancelled",
    "exit_class": "interrupted",
}
"""Why a session that was stopped (server shutdown) while it opened was not opened."""


class SessionRefused(Exception):
    """The runtime could not open the session; ``error`` is its ``error`` output
    (``failure_reason`` ``session_busy``: another runtime drives it)."""

    def __init__(self, error: ErrorMessage) -> None:
        super().__init__(error["message"])
        self.error = error


class SessionLive(Exception):
    """``start`` found the session already running; attach to ``live`` instead."""

    def __init__(self, live: LiveSession) -> None:
        super().__init__(live.session_id)
        self.live = live
