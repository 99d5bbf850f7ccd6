"""The tool journal's rules, shared by both stores (DESIGN.md §9.4).

The stores run the statements; this module checks the arguments, builds the rows a
batch is journaled with, and turns fetched rows back into the ``list_batches`` shape and
the rendered uncommitted messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple, get_args

from agent_lab.application.events import idempotency_key
from agent_lab.application.session_store import BatchIntent, CallStatus
from agent_lab.domain.errors import UsageError
from agent_lab.infrastructure.sqlite.records import (
    check_unique_events,
    dumps,
    message_json,
    new_id,
    rendered_journal_message,
)
from agent_lab.infrastructure.sqlite.rows import MessageFields, message_fields

CALL_STATUSES: Final = get_args(CallStatus)
ABANDON_STATES: Final = ("cancelled", "failed")
BATCH_COLUMNS: Final = (
    "b.id, b.session_id, b.turn_index, b.round_index, b.scope, b.mode, b.state,"
    " b.assistant, b.created_at, b.finished_at, b.reported_turn"
)
CALL_COLUMNS: Final = (
    "position, event, state, result, landed_at, idempotency_key, arguments, dispatched_at"
)


class OpenedBatch(NamedTuple):
    """The rows ``open_batch`` writes, built before its transaction starts."""

    batch_id: str
    batch: tuple[str, str, int, int, str, str, str | None]
    calls: list[tuple[str, int, str, str, str]]
    visible: list[MessageFields]


def opened_batch(session_id: str, intent: BatchIntent) -> OpenedBatch:
    """The batch row (id ... mode, assistant), its pending calls and visible messages.

    Raises:
        UsageError: two events share an id, or a value is not JSON.
    """
    check_unique_events(intent.events)
    batch_id = new_id()
    assistant = None if intent.assistant is None else message_json(intent.assistant)
    calls = [
        (
            batch_id,
            position,
            dumps(event.model_dump(), f"tool call {event.id!r}"),
            event.id,
            idempotency_key(intent.scope, event.id),
        )
        for position, event in enumerate(intent.events)
    ]
    visible = [message_fields(message) for message in intent.visible]
    batch = (batch_id, session_id, intent.turn_index, intent.round_index, intent.scope)
    return OpenedBatch(batch_id, (*batch, intent.mode, assistant), calls, visible)


def check_call_status(status: str) -> None:
    """Raises: UsageError: ``status`` is not a call status."""
    if status not in CALL_STATUSES:
        raise UsageError(f"call status must be one of {CALL_STATUSES}, not {status!r}")


def check_abandon_state(state: str) -> None:
    """Raises: UsageError: a batch cannot be abandoned as ``state``."""
    if state not in ABANDON_STATES:
        raise UsageError(f"a batch can be abandoned as {ABANDON_STATES}, not {state!r}")


def check_pending(batch_id: str, action: str, state: object) -> None:
    """Raises: UsageError: the batch is no longer pending, so ``action`` is refused."""
    if state != "pending":
        raise UsageError(f"cannot {action} tool batch {batch_id!r}: it is already {state}")


def unknown_batch(batch_id: str) -> UsageError:
    return UsageError(f"unknown tool batch {batch_id!r}")


def rendered_batch(
    turn_index: int,
    state: str,
    assistant: str | None,
    created_at: str,
    results: Iterable[Sequence[Any]],
) -> list[dict[str, Any]]:
    """One uncommitted batch as messages: its assistant message, then its results."""
    rendered: list[dict[str, Any]] = []
    if assistant is not None:
        rendered.append(rendered_journal_message(assistant, turn_index, created_at, state))
    rendered.extend(
        rendered_journal_message(result, turn_index, landed, state) for result, landed in results
    )
    return rendered


def batch_dict(row: Sequence[Any], calls: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """A ``list_batches`` entry from a ``BATCH_COLUMNS`` row and its ``CALL_COLUMNS`` rows."""
    return {
        "id": row[0],
        "session_id": row[1],
        "turn_index": row[2],
        "round_index": row[3],
        "scope": row[4],
        "mode": row[5],
        "state": row[6],
        "assistant": _loads(row[7]),
        "created_at": row[8],
        "finished_at": row[9],
        "reported_turn": row[10],
        "calls": [
            {
                "position": position,
                "event": json.loads(event),
                "state": state,
                "result": _loads(result),
                "landed_at": landed_at,
                "idempotency_key": key,
                "arguments": _loads(arguments),
                "dispatched_at": dispatched_at,
            }
            for position, event, state, result, landed_at, key, arguments, dispatched_at in calls
        ],
    }


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
