"""Turn records from what the store kept, and from a live output stream (pure).

``session_records`` reads the store's rows (``list_audit_logs`` and, when given,
``list_turns``); ``LiveRecords`` folds the ``audit`` outputs of a running session as they
arrive. Both feed the same ``TurnRecordBuilder``, so a reopened turn's record equals the
live one, field for field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_lab.application._recovery import recovery_from_batches
from agent_lab.application.pricing import PriceTable
from agent_lab.application.record._closing import apply_ledger_outcomes, close_turn
from agent_lab.application.record._turn_audits import (
    belongs_to_turn,
    recovered_call,
    restored_calls,
)
from agent_lab.application.record.fold import TurnRecordBuilder
from agent_lab.application.record.model import RecoveredCallRecord, RequestRef, TurnRecord
from agent_lab.application.session_store import INTERRUPTED_MESSAGE, INTERRUPTED_REASON

_CLOSED_STATES = frozenset({"completed", "terminated", "failed", "cancelled"})


def session_records(
    audits: Iterable[Mapping[str, Any]],
    *,
    session_id: str | None,
    turns: Iterable[Mapping[str, Any]] = (),
    prices: PriceTable | None = None,
    stopped: bool = False,
    ledger: Iterable[Mapping[str, Any]] = (),
) -> list[TurnRecord]:
    """One record per turn, in turn order.

    Args:
        audits: Audit rows (``turn_index``, ``event``, ``details``) in stored order.
        session_id: The session the rows belong to.
        turns: Turn rows (``turn_index``, ``status``, ``failure_reason``,
            ``failure_message``): a turn whose closing audit never reached the store
            is closed with its row's status, and a turn with no audit at all still
            gets a record. A turn still open while a later turn exists was
            interrupted (its process died): it is closed as ``failed`` with the
            reason ``interrupted``.
        prices: Prices the calls; without one every cost is unknown.
        stopped: No live runtime holds the session (``ClaimListing.live_claims``): a
            turn still open was interrupted too, though no runtime has recovered it
            yet. It is closed as ``failed`` / ``interrupted`` with
            ``UNRECOVERED_MESSAGE``, and its calls read as ``ledger`` has them.
        ledger: The session's tool journal (``list_batches`` rows, with ``stopped``).
    """
    builders: dict[int, TurnRecordBuilder] = {}
    restored: dict[int, list[Mapping[str, Any]]] = {}

    def builder(turn_index: int) -> TurnRecordBuilder:
        if turn_index not in builders:
            builders[turn_index] = TurnRecordBuilder(
                turn_index, session_id=session_id, prices=prices
            )
            builders[turn_index].recovered(restored.pop(turn_index, []))
        return builders[turn_index]

    outcomes: Outcomes = {}
    for row in audits:
        turn_index, event, details = row.get("turn_index"), row["event"], row["details"]
        reported = restored_calls(event, details)
        if reported is not None:
            restored.setdefault(reported[0], []).extend(reported[1])
        elif turn_index is not None and belongs_to_turn(event, details):
            builder(int(turn_index)).add(event, details)
        note_outcomes(outcomes, event, details)
    for turn in turns:
        status, found = turn.get("status"), builder(int(turn["turn_index"]))
        found.know_user_message(turn.get("user_message"))
        if status in _CLOSED_STATES:
            found.close(status, turn.get("failure_reason"), turn.get("failure_message"))
    last = max(builders, default=0)
    unrecovered: set[int] = set()
    for index, found in builders.items():
        if index < last and not found.closed:  # a later turn ran: this one never will end
            found.close(*_INTERRUPTED)
        elif stopped and not found.closed:  # its runtime is gone: it never will end either
            found.close(*_UNRECOVERED)
            unrecovered.add(index)
    if unrecovered:
        _note_ledger(outcomes, ledger, unrecovered)
    records = [builders[index].build() for index in sorted(builders)]
    for record in records:
        apply_ledger_outcomes(record, outcomes.get(record.turn_index, {}))
    return records


_INTERRUPTED = ("failed", INTERRUPTED_REASON, INTERRUPTED_MESSAGE)

UNRECOVERED_MESSAGE = (
    f"{INTERRUPTED_MESSAGE} (not yet recovered: the next runtime to open the session"
    " closes the turn and reports its calls to the model)"
)
"""The message of a turn interrupted by a runtime that stopped, as the views read it
before any runtime has reopened the session (the stored row still says ``running``)."""
_UNRECOVERED = ("failed", INTERRUPTED_REASON, UNRECOVERED_MESSAGE)

Outcomes = dict[int, dict[str, str]]
"""What the effect ledger reported of interrupted calls: turn → event id → status."""


def note_outcomes(outcomes: Outcomes, event: str, details: Mapping[str, Any]) -> None:
    """Add the ``recovered_calls`` a ``session_started`` or ``turn_started`` lists."""
    if event in ("session_started", "turn_started"):
        for call in details.get("recovered_calls") or ():
            outcomes.setdefault(int(call["turn_index"]), {})[str(call["event_id"])] = call["status"]


def _note_ledger(
    outcomes: Outcomes, ledger: Iterable[Mapping[str, Any]], turn_indexes: set[int]
) -> None:
    """Add what the effect ledger holds now of the calls of these turns, where no later
    turn has reported them yet (as the next runtime will report them)."""
    batches = [batch for batch in ledger if batch.get("turn_index") in turn_indexes]
    for call in left_pending_calls(batches) + unreported_calls(batches):
        outcomes.setdefault(call.turn_index, {}).setdefault(call.event_id, call.status)


def left_pending_calls(batches: Iterable[Mapping[str, Any]]) -> list[RecoveredCallRecord]:
    """The calls of the batches a stopped runtime left ``pending`` (``list_batches``
    rows), as the next runtime will report them once it has abandoned them
    (dispatched ones ``unknown``, the others ``not_executed``)."""
    pending = [
        {**batch, "state": "cancelled"} for batch in batches if batch.get("state") == "pending"
    ]
    return unreported_calls(pending)


def unrecovered_turn_rows(
    turns: Iterable[Mapping[str, Any]], records: Iterable[TurnRecord]
) -> list[dict[str, Any]]:
    """``turns`` (stored rows) with each row still ``running`` whose record
    ``session_records(stopped=True)`` closed as not yet recovered read as its record
    does (``failed`` / ``interrupted``), so the rows and the records agree."""
    closed = {
        record.turn_index: record.failure
        for record in records
        if record.failure is not None and record.failure.message == UNRECOVERED_MESSAGE
    }
    rows = []
    for row in turns:
        failure = closed.get(int(row["turn_index"]))
        if row.get("status") == "running" and failure is not None:
            row = {
                **row,
                "status": "failed",
                "failure_reason": failure.reason,
                "failure_message": failure.message,
            }
        rows.append(dict(row))
    return rows


def interrupted(record: TurnRecord) -> TurnRecord:
    """A turn left open by a runtime that stopped, once a later turn runs: a copy closed
    as ``failed`` with the reason ``interrupted``, as ``session_records`` closes it."""
    closed = record.model_copy(deep=True)
    if closed.status == "running":
        close_turn(closed, *_INTERRUPTED, seq=len(closed.entries))
    return closed


def unreported_calls(batches: Iterable[Mapping[str, Any]]) -> list[RecoveredCallRecord]:
    """The calls of interrupted batches that no turn has reported to the model yet
    (``list_unreported_batches`` rows): what the next turn will report, as the store's
    effect ledger knows it now (``seq`` ``None``)."""
    recovery = recovery_from_batches(dict(batch) for batch in batches)
    return [recovered_call(entry) for entry in recovery.audit_entries()]


def turn_audits(audits: Iterable[Mapping[str, Any]], turn_index: int) -> list[Mapping[str, Any]]:
    """The audit rows a turn's record was built from, in order: ``entries[i]`` of the
    record is ``turn_audits(...)[i]``."""
    return [
        row
        for row in audits
        if row.get("turn_index") == turn_index and belongs_to_turn(row["event"], row["details"])
    ]


def request_sent(
    audits: Iterable[Mapping[str, Any]], turn_index: int, ref: RequestRef
) -> Mapping[str, Any]:
    """The details of the request audit a model call refers to (the request as sent)."""
    row = turn_audits(audits, turn_index)[ref.audit_seq - 1]
    if row["event"] != ref.audit:
        raise ValueError(f"audit {ref.audit_seq} of turn {turn_index} is not a {ref.audit}")
    details: Mapping[str, Any] = row["details"]
    return details


class LiveRecords:
    """The records of a running session, from its output messages as they arrive.

    Feed every output message (``feed``); audits are routed to their turn by the
    ``turn_started`` (sessions) or ``session_started`` (one-shot runs) before them.
    """

    def __init__(self, *, prices: PriceTable | None = None) -> None:
        self._prices = prices
        self._session_id: str | None = None
        self._current: int | None = None
        self._builders: dict[int, TurnRecordBuilder] = {}
        self._restored: dict[int, list[Mapping[str, Any]]] = {}
        self._outcomes: Outcomes = {}

    def feed(self, message: Mapping[str, Any]) -> int | None:
        """Take one output message; returns the turn index its audit went to, if any."""
        if message.get("type") != "audit":
            return None
        event, details = message["event"], message["details"]
        note_outcomes(self._outcomes, event, details)
        if event == "session_started":
            self._session_id = details.get("session_id")
            self._current = details.get("first_turn_index")
            found = restored_calls(event, details)
            if found is not None:
                self._restored.setdefault(found[0], []).extend(found[1])
        elif event == "turn_started":
            self._current = details["turn_index"]
        if self._current is None or not belongs_to_turn(event, details):
            return None
        if self._current not in self._builders:
            self._builders[self._current] = TurnRecordBuilder(
                self._current, session_id=self._session_id, prices=self._prices
            )
            self._builders[self._current].recovered(self._restored.pop(self._current, []))
        self._builders[self._current].add(event, details)
        return self._current

    def record(self, turn_index: int) -> TurnRecord:
        """The record of one turn so far."""
        return self.corrected(self._builders[turn_index].build())

    def corrected(self, record: TurnRecord) -> TurnRecord:
        """``record`` with its tools as the effect ledger reported them since (as
        ``session_records`` reads them once the session is reopened)."""
        apply_ledger_outcomes(record, self._outcomes.get(record.turn_index, {}))
        return record

    def reported_before(self, turn_index: int) -> list[TurnRecord]:
        """Records of earlier turns still held whose calls a later turn reported."""
        held = sorted(i for i in self._outcomes if i < turn_index and i in self._builders)
        return [self.record(index) for index in held]

    def forget_before(self, turn_index: int) -> None:
        """Drop the builders of the turns before this one (a long-lived session keeps
        only the turns whose records can still change)."""
        for index in [index for index in self._builders if index < turn_index]:
            del self._builders[index]

    def records(self) -> list[TurnRecord]:
        return [self.record(index) for index in sorted(self._builders)]
