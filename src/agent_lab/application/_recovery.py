"""Effects of interrupted batches, given back to the model (DESIGN.md §9.4).

A batch that never committed is not part of the transcript (§8), but its effects may
have happened; and the results of a committed batch of a turn whose runtime died were
never answered (in ``dual_agent`` they are not even in the restored history). On
restore (and after a live turn lost its batch), these unreported batches become one
labelled note for the model, in the mode's results format, delivered with the next
turn right after the user's message:

* calls with a recorded result — their result, as recorded;
* dispatched calls without one — ``unknown``: "outcome unknown — check before
  repeating";
* calls never dispatched — ``not_executed``.

Every line carries ``"recovered": true``. The same calls are audited as
``recovered_calls`` so the lab can show them as uncertain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from agent_lab.application._transcript import EVENT_AGENT_NAME
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

RecoveredStatus = Literal["succeeded", "failed", "unknown", "not_executed"]

UNKNOWN_NOTE = "outcome unknown — check before repeating"
NOT_EXECUTED_NOTE = "not executed — the interruption came before it started"

DUAL_HEADER = (
    "EventAgent results: recovered after an interruption. Calls marked succeeded or "
    "failed already ran: do not repeat them. Calls marked unknown may have run: "
    "check before repeating them. Calls marked not_executed never ran."
)
DIRECT_HEADER = (
    "Recovered tool results: a previous turn was interrupted before it answered. "
    "Calls marked succeeded or failed already ran: do not repeat them. Calls marked "
    "unknown may have run: check before repeating them. Calls marked not_executed "
    "never ran."
)

_STATUS_OF_STATE: dict[str, RecoveredStatus] = {
    "succeeded": "succeeded",
    "failed": "failed",
    "unknown": "unknown",
    "dispatched": "unknown",
    "pending": "not_executed",
    "cancelled": "not_executed",
}


@dataclass(frozen=True)
class RecoveredCall:
    """One call of an interrupted batch, as the journal knows it."""

    batch_id: str
    turn_index: int
    round_index: int
    event_id: str
    event_name: str
    arguments: dict[str, Any]
    status: RecoveredStatus
    idempotency_key: str | None = None
    result: Any = None
    """The recorded payload (``succeeded`` / ``failed`` only)."""

    def audit_entry(self) -> dict[str, Any]:
        """Every field but the recorded ``result``."""
        entry = asdict(self)
        del entry["result"]
        return entry

    def note_line(self) -> str:
        """One JSON line of the note (a format the simulator and models read)."""
        line: dict[str, Any] = {
            "recovered": True,
            "event_id": self.event_id,
            "event_name": self.event_name,
            "status": self.status,
            "arguments": self.arguments,
        }
        if self.status == "failed":
            error = self.result.get("error") if isinstance(self.result, dict) else None
            line["error"] = error or "failed"
        if self.status in ("succeeded", "failed"):
            line["result"] = self.result
        elif self.status == "unknown":
            line["note"] = UNKNOWN_NOTE
            line["idempotency_key"] = self.idempotency_key
        else:
            line["note"] = NOT_EXECUTED_NOTE
        return json.dumps(line, ensure_ascii=False)


@dataclass(frozen=True)
class Recovery:
    """The unreported calls of interrupted batches, and the batches they came from."""

    calls: tuple[RecoveredCall, ...] = ()
    batch_ids: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.calls)

    def audit_entries(self) -> list[dict[str, Any]]:
        return [call.audit_entry() for call in self.calls]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call.status] = counts.get(call.status, 0) + 1
        return counts


@dataclass(frozen=True)
class KeptNote:
    """What a turn's start stores of a recovery (``chat_agent_tools``): the note, if any
    is left to tell, and the batches it reports, marked told in the same write."""

    message: ChatMessage | None
    batch_ids: tuple[str, ...]


NO_RECOVERY = Recovery()
"""Nothing to recover (immutable, so every session can start from it)."""


def recovery_from_batches(batches: Iterable[dict[str, Any]]) -> Recovery:
    """The calls of the given journal batches (``list_unreported_batches`` rows:
    abandoned batches, and committed ones of a turn that never finished)."""
    calls: list[RecoveredCall] = []
    batch_ids: list[str] = []
    for batch in batches:
        if batch.get("state") == "pending":
            continue  # still some live runtime's
        batch_ids.append(str(batch["id"]))
        calls += [_recovered_call(batch, call) for call in batch.get("calls") or []]
    return Recovery(tuple(calls), tuple(batch_ids))


def _recovered_call(batch: dict[str, Any], call: dict[str, Any]) -> RecoveredCall:
    event = call.get("event") or {}
    arguments: dict[str, Any] = {}
    for candidate in (call.get("arguments"), event.get("arguments")):
        if isinstance(candidate, dict):
            arguments = candidate
            break
    status = _STATUS_OF_STATE.get(str(call.get("state")), "unknown")
    return RecoveredCall(
        batch_id=str(batch["id"]),
        turn_index=int(batch.get("turn_index") or 0),
        round_index=int(batch.get("round_index") or 0),
        event_id=str(event.get("id", "")),
        event_name=str(event.get("name", "")),
        arguments=arguments,
        status=status,
        idempotency_key=call.get("idempotency_key"),
        result=_payload(call.get("result")) if status in ("succeeded", "failed") else None,
    )


def _payload(result: Any) -> Any:
    """The tool payload inside a recorded ``tool`` message."""
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def dual_note(recovery: Recovery) -> ChatMessage:
    """``dual_agent``: the event agent's results message, every line flagged recovered."""
    lines = "\n".join(call.note_line() for call in recovery.calls)
    return ChatMessage(role="user", content=f"{DUAL_HEADER}\n{lines}", name=EVENT_AGENT_NAME)


def direct_note(recovery: Recovery) -> ChatMessage:
    """``chat_agent_tools``: a system note (a ``tool`` message without its batch would be
    an orphan, which providers reject). A committed batch of a turn that died is in it
    too, though the restored transcript holds its results: the note comes after the
    user's new message, which may ask again for what already ran."""
    lines = "\n".join(call.note_line() for call in recovery.calls)
    return ChatMessage(role="system", content=f"{DIRECT_HEADER}\n{lines}")


class MemoryLedger:
    """The effect ledger of a session without a store, for the session's life.

    It keeps the open and abandoned batches as journal rows (the shape
    ``list_unreported_batches`` returns), so a cancelled or failed turn's effects reach
    the next turn of a live session just as they do with a store.
    """

    def __init__(self) -> None:
        self._batches: dict[str, dict[str, Any]] = {}

    def open(
        self,
        batch_id: str,
        turn_index: int,
        round_index: int,
        keyed: Sequence[tuple[ToolCallEvent, str]],
    ) -> None:
        """``keyed``: each call with its idempotency key, in call order."""
        calls = [
            {"event": event.model_dump(), "state": "pending", "idempotency_key": key}
            for event, key in keyed
        ]
        batch = {"id": batch_id, "turn_index": turn_index, "round_index": round_index}
        self._batches[batch_id] = {**batch, "state": "pending", "calls": calls}

    def dispatched(self, batch_id: str, event_id: str, arguments: dict[str, Any]) -> None:
        call = self._call(batch_id, event_id)
        if call is not None:
            call.update(state="dispatched", arguments=arguments)

    def landed(self, batch_id: str, event_id: str, status: str, result: ChatMessage) -> None:
        call = self._call(batch_id, event_id)
        if call is not None:
            call.update(state=status, result=result.model_dump())

    def commit(self, batch_id: str) -> None:
        self._batches.pop(batch_id, None)

    def abandon(self, batch_id: str) -> None:
        batch = self._batches.get(batch_id)
        if batch is None or batch["state"] != "pending":
            return
        batch["state"] = "cancelled"
        for call in batch["calls"]:
            if call["state"] in ("pending", "dispatched"):
                call["state"] = "unknown" if call["state"] == "dispatched" else "cancelled"

    def unreported(self) -> Recovery:
        return recovery_from_batches(self._batches.values())

    def reported(self, batch_ids: Iterable[str]) -> None:
        for batch_id in batch_ids:
            self._batches.pop(batch_id, None)

    def _call(self, batch_id: str, event_id: str) -> dict[str, Any] | None:
        batch = self._batches.get(batch_id, {"calls": []})
        return next((c for c in batch["calls"] if c["event"]["id"] == event_id), None)
