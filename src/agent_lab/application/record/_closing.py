"""Closing a turn in its record: every call still open is closed, none stays running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_lab.application.record.model import FailureRecord, TurnRecord

_TURN_STATES = frozenset({"completed", "terminated", "failed", "cancelled"})

_TOOL_ERRORS: tuple[tuple[str, str], ...] = (
    ("unknown tool", "tool_failed:unknown_tool"),
    ("tool disabled", "tool_failed:disabled"),
    ("invalid arguments", "tool_failed:invalid_arguments"),
    ("tool handler failed: timed out", "tool_failed:timeout"),
    ("tool handler failed", "tool_failed:handler_error"),
    ("argument generation failed", "tool_failed:argument_generation"),
    ("not run", "tool_cancelled"),
)
"""The registry's error payloads (``agent_lab.application.tools``), by prefix."""


def tool_failure_reason(status: str, result: Any) -> tuple[str, str]:
    """A reason code and message for a tool execution that did not succeed."""
    error = result.get("error") if isinstance(result, dict) else None
    message = str(error) if error is not None else f"the tool {status}"
    if status == "cancelled" and error is None:
        return "tool_cancelled", "the turn ended before the tool finished"
    for prefix, reason in _TOOL_ERRORS:
        if message.startswith(prefix):
            return reason, message
    return ("tool_cancelled" if status == "cancelled" else "tool_failed:error"), message


def close_turn(
    record: TurnRecord, status: str, reason: str | None, message: str | None, *, seq: int
) -> None:
    """Set the turn's final state; close every round, call and tool still running.

    A failed turn's open model call failed with the turn's reason; everything else
    still open (tools, rounds, calls of a cancelled turn) is ``cancelled``.
    """
    record.status = status if status in _TURN_STATES else "failed"  # type: ignore[assignment]
    if record.status in ("failed", "cancelled"):
        reason = reason or ("cancelled" if record.status == "cancelled" else "unknown")
        message = message or f"the turn {record.status}"
        record.failure = FailureRecord(seq=seq, reason=reason, message=message, where="turn")
        record.failures.append(record.failure)
    _close_open_parts(record, reason)


def _close_open_parts(record: TurnRecord, reason: str | None) -> None:
    """Every call, tool and round still running ends with the turn."""
    failed = record.status == "failed"
    for call in record.model_calls:
        if call.status == "running":
            call.status = "failed" if failed else "cancelled"
            call.failure_reason = reason if failed else "cancelled"
    for tool in record.tool_executions:
        if tool.status == "running":
            tool.status = "cancelled"
            tool.failure_reason = "tool_cancelled"
    for round_record in record.rounds:
        if round_record.status == "running":
            round_record.status = "failed" if failed else "cancelled"


_LEDGER_OUTCOMES: dict[str, tuple[str, str | None]] = {
    "succeeded": ("succeeded", None),
    "failed": ("failed", "tool_failed:error"),
    "unknown": ("failed", "outcome_unknown"),
}
"""A closed-as-cancelled tool's state from the effect ledger's outcome of its call."""


def apply_ledger_outcomes(record: TurnRecord, outcomes: Mapping[str, str]) -> None:
    """Correct the tools the turn's close left ``cancelled`` by what the effect ledger
    recorded of their calls (``outcomes``: event id → recovered status): a call is
    ``cancelled`` only when its effect did not happen (DESIGN.md §9.4); one whose
    outcome is unknown may have run, and fails as ``outcome_unknown``."""
    for tool in record.tool_executions:
        known = _LEDGER_OUTCOMES.get(outcomes.get(tool.event_id, ""))
        if tool.status == "cancelled" and known is not None:
            tool.status, tool.failure_reason = known  # type: ignore[assignment]
