"""The turn records a live session streams (``turn_record`` frames).

``RecordFeed`` folds a session's output with ``LiveRecords`` (the fold the store's rows
go through when the session is reopened) and, after each audit that changes what the
page shows of a turn, gives the frame to send: the turn's record so far.
"""

from __future__ import annotations

from agent_lab.application.pricing import PriceTable
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.record import LiveRecords
from agent_lab.interfaces.web.frames import TurnRecordFrame

RECORD_AUDITS = frozenset(
    {
        "turn_started",
        "chat_event_detected",
        "chat_agent_response",
        "event_batch_started",
        "event_agent_response",
        "event_batch_results",
        "event_policy_decision",
        "chat_round_finished",
        "turn_completed",
        "session_finished",
    }
)
"""Audits after which a turn's record is sent (``turn_started`` only when it reports
recovered calls): the arguments the event agent resolved, tool statuses and results,
failures, the turn's end."""


class RecordFeed:
    """The ``turn_record`` frames of one live session."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self._records = LiveRecords(prices=prices)

    def after(self, message: OutputMessage) -> TurnRecordFrame | None:
        """The frame to send after ``message``, if it changed a turn's record."""
        if message["type"] != "audit":
            return None
        turn_index = self._records.feed(message)
        event = message["event"]
        if turn_index is None or event not in RECORD_AUDITS:
            return None
        if event == "turn_started":
            self._records.forget_before(turn_index)  # earlier turns are closed
        record = self._records.record(turn_index)
        if event == "turn_started" and not record.recovered_calls:
            return None
        return {
            "type": "turn_record",
            "turn_index": turn_index,
            "record": record.model_dump(mode="json"),
        }
