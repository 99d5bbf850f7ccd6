"""Cold starts: the turns whose first model call opened a provider client's first
connection in this server process (the process's shared client, or a session's own
client for an endpoint typed into the page), so their TTFT includes connection set-up.

Kept in memory for the server's lifetime: after a restart, earlier turns are no longer
flagged (the store does not record connections).
"""

from __future__ import annotations

from typing import Any


class ColdStarts:
    """Which turn of which session made a cold call, as runtimes start."""

    def __init__(self) -> None:
        self._shared_warm = False
        self._turns: dict[str, set[int]] = {}

    def runtime_started(self, session_id: str, first_turn: int, *, own_client: bool) -> None:
        """A runtime starts for ``session_id`` at ``first_turn`` with a new client
        (``own_client``) or the process's shared one (cold only the first time)."""
        if own_client or not self._shared_warm:
            self._turns.setdefault(session_id, set()).add(first_turn)
        if not own_client:
            self._shared_warm = True

    def flag(self, session_id: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``calls`` with ``cold_start`` set on each call: true for the first chat call
        (round 1) of a cold turn, false otherwise."""
        cold = self._turns.get(session_id, set())
        return [
            {**call, "cold_start": _first_chat_call(call) and call.get("turn_index") in cold}
            for call in calls
        ]


def _first_chat_call(call: dict[str, Any]) -> bool:
    return call.get("call_kind") == "chat" and call.get("round_index") == 1
