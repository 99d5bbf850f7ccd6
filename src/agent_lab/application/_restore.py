"""Reading stored message rows back as messages, repairing what the rules allow.

A row that is not a valid message either gets a recorded repair or stops the restore
with an ``InvalidStoredRow`` naming it (DESIGN.md §8). Repairs:

* an assistant message whose ``tool_calls`` entries are malformed (e.g. without an
  ``id``) is restored without its calls, the rule for a batch that cannot be answered
  (its replies then become orphans, which the restore drops).

Any other invalid row (an unknown role, content that is not text) cannot be repaired.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, get_args

from pydantic import ValidationError

from agent_lab.application._recovery import Recovery
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.domain.errors import InvalidStoredRow
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, Role

ROLES: frozenset[str] = frozenset(get_args(Role))


@dataclass(frozen=True)
class RowRepair:
    """One stored row restored differently from how it was stored."""

    seq: Any
    turn_index: Any
    problem: str
    repair: str

    def audit_entry(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoredHistory:
    messages: list[ChatMessage] = field(default_factory=list)
    repairs: list[RowRepair] = field(default_factory=list)


def read_stored_history(records: Iterable[dict[str, Any]], session_id: str = "") -> StoredHistory:
    """The stored rows as messages, with the repairs made.

    Raises:
        InvalidStoredRow: a row no repair rule applies to, naming it.
    """
    history = StoredHistory()
    for record in records:
        history.messages.append(_read_row(record, session_id, history.repairs))
    return history


def _read_row(record: dict[str, Any], session_id: str, repairs: list[RowRepair]) -> ChatMessage:
    seq, turn = record.get("seq"), record.get("turn_index")
    role = record.get("role")
    if role not in ROLES:
        allowed = ", ".join(sorted(ROLES))
        raise InvalidStoredRow(session_id, seq, turn, f"role {role!r} is not one of {allowed}")
    calls, problem = _tool_calls(record.get("tool_calls"))
    if problem is not None:
        repairs.append(RowRepair(seq, turn, problem, "restored without its tool calls"))
    try:
        return ChatMessage(
            role=role,
            content=record.get("content") or "",
            name=record.get("name"),
            tool_call_id=record.get("tool_call_id"),
            tool_calls=calls,
        )
    except ValidationError as exc:
        raise InvalidStoredRow(session_id, seq, turn, _first_problem(exc)) from exc


def _tool_calls(raw: Any) -> tuple[list[ToolCallEvent], str | None]:
    """The row's calls, or none and the problem when any entry is malformed."""
    entries = raw or []
    if not isinstance(entries, list):
        return [], "tool_calls is not a list"
    calls: list[ToolCallEvent] = []
    for position, entry in enumerate(entries):
        try:
            calls.append(ToolCallEvent.model_validate(entry))
        except ValidationError as exc:
            return [], f"tool_calls entry {position} is malformed: {_first_problem(exc)}"
    return calls, None


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', 'invalid')}"


@dataclass(frozen=True)
class StoredSession:
    """What a reconnecting runtime reads back."""

    session_id: str
    records: list[dict[str, Any]]
    next_turn_index: int
    recovery: Recovery = Recovery()
    """Interrupted batches whose effects the model has not been told about yet."""


def request_snapshot(request: DebugRunRequest) -> dict[str, Any]:
    """The session's config snapshot: the request without its turn-specific fields."""
    return request.model_dump(mode="json", exclude={"user_message", "session_id"})
