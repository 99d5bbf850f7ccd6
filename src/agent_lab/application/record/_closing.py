"""Closing a turn in its record: every call still open is closed, none stays running."""

from __future__ import annotations

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
