"""Where a stored session goes on when the hub starts a runtime for it."""

from __future__ import annotations

from dataclasses import dataclass

from agent_lab.application.record import TurnRecord, session_records
from agent_lab.domain.errors import SessionNotFound
from agent_lab.interfaces.lab import Lab


@dataclass(frozen=True)
class ResumePoint:
    """Where a stored session goes on: its next turn, and the records of the turns a
    stopped runtime left running (the next turn closes them as interrupted)."""

    first_turn: int
    left_open: list[TurnRecord]


def resume_point(lab: Lab, session_id: str) -> ResumePoint:
    """Where the session goes on (blocking: run it in a thread)."""
    store = lab.store
    if store is None:
        return ResumePoint(1, [])
    try:
        first_turn = store.next_turn_index(session_id)
    except SessionNotFound:
        return ResumePoint(1, [])
    if first_turn == 1:
        return ResumePoint(1, [])
    records = session_records(
        store.list_audit_logs(session_id),
        session_id=session_id,
        turns=store.list_turns(session_id),
        prices=lab.prices,
    )
    return ResumePoint(first_turn, [r for r in records if r.status == "running"])
