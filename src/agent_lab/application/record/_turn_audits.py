"""Which audits make up a turn's record, and the interrupted calls a restore reported.

Both the builder (``fold``) and the readers (``reading``) sort audits into turns by
these rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_lab.application._recovery import NOT_EXECUTED_NOTE, UNKNOWN_NOTE
from agent_lab.application.record.model import RecoveredCallRecord

Details = Mapping[str, Any]

SESSION_AUDITS = frozenset({"session_started", "session_finished"})
"""Session-level audits; a one-shot run's ``session_finished`` (it has a ``status``)
closes its turn and is kept."""

_RECOVERED_NOTES = {"unknown": UNKNOWN_NOTE, "not_executed": NOT_EXECUTED_NOTE}


def belongs_to_turn(event: str, details: Details) -> bool:
    """Whether an audit is part of a turn's record."""
    return event not in SESSION_AUDITS or (event == "session_finished" and "status" in details)


def restored_calls(event: str, details: Details) -> tuple[int, list[Details]] | None:
    """A restore's ``session_started`` that reported interrupted calls: the turn they
    were reported to (its first) and the calls; ``None`` for any other audit."""
    calls = details.get("recovered_calls")
    first = details.get("first_turn_index")
    if event != "session_started" or not calls or not isinstance(first, int):
        return None
    return first, list(calls)


def recovered_call(call: Details, seq: int | None = None) -> RecoveredCallRecord:
    """One ``recovered_calls`` entry of an audit, with its readable note."""
    note = _RECOVERED_NOTES.get(str(call.get("status")))
    return RecoveredCallRecord.model_validate({**call, "seq": seq, "note": note})
