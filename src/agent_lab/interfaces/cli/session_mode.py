"""The mode a continued session runs in: ``--mode``, else the mode its last turn ran in.

A session's saved request keeps the mode it was *created* with; a later ``--mode``
changes the mode of the turns it runs, not that request. So ``run --session ID`` (and
``chat --session ID``) without ``--mode`` reads the mode from the stored turns: the
last turn that made a model call has it in its call metrics; a later turn that failed
before any call has it in its own audits (``session_started``, ``chat_round_started``);
the saved request's mode is the last resort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.record.modes import modes_by_turn
from agent_lab.application.session_store import SessionStore
from agent_lab.interfaces.cli.common import as_mode


@dataclass(frozen=True, slots=True)
class SessionMode:
    """A continued session's mode, and where it came from (for the note ``run`` prints)."""

    mode: ToolInvocationMode | None
    origin: str
    """``flag``, ``last_turn`` (with ``turn``) or ``saved``."""
    turn: int | None = None

    def note(self, session_id: str) -> str | None:
        """``continuing session … in <mode> mode, the mode turn N ran in`` (or ``None``)."""
        if self.mode is None or self.origin == "flag":
            return None
        if self.origin == "last_turn":
            why = f"the mode its last turn (turn {self.turn}) ran in"
        else:
            why = "the mode it was started in"
        return f"continuing session {session_id} in {self.mode} mode, {why}; --mode changes it"


def continued_mode(store: SessionStore, session: dict[str, Any]) -> SessionMode:
    """The mode the stored ``session`` last ran in (see the module docstring).

    Raises:
        ConfigError: a stored mode this Agent Lab does not know.
    """
    session_id = str(session["id"])
    summary = store.usage_summary(session_id)
    by_turn = modes_by_turn(summary["calls"])
    for turn in sorted((int(row["turn_index"]) for row in summary["turns"]), reverse=True):
        mode = by_turn.get(turn) or _audited_mode(store, session_id, turn)
        if mode:
            return SessionMode(as_mode(mode), "last_turn", turn)
    return SessionMode(as_mode(session.get("mode")), "saved")


def _audited_mode(store: SessionStore, session_id: str, turn: int) -> str | None:
    for audit in store.list_audit_logs(session_id, turn_index=turn):
        mode = audit["details"].get("tool_invocation_mode")
        if isinstance(mode, str) and mode:
            return mode
    return None
