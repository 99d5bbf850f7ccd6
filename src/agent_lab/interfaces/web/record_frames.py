"""The turn records a live session streams (``turn_record`` frames).

``RecordFeed`` folds a session's output with ``LiveRecords`` (the fold the store's rows
go through when the session is reopened) and, after each audit that changes what the
page shows of a turn, gives the frames to send: the turn's record so far. A session
resumed after its runtime stopped mid-turn starts with that turn's stored record; the
first new turn closes it as interrupted, and its record is sent then, as the store's
fold has it from that moment on.
"""

from __future__ import annotations

from agent_lab.application.pricing import PriceTable
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.record import LiveRecords, TurnRecord, interrupted
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
    """The ``turn_record`` frames of one live session.

    Args:
        prices: Prices the records' calls.
        left_open: Stored records of turns a stopped runtime left running.
    """

    def __init__(
        self, prices: PriceTable | None = None, left_open: list[TurnRecord] | None = None
    ) -> None:
        self._records = LiveRecords(prices=prices)
        self._left_open = list(left_open or [])

    def after(self, message: OutputMessage) -> list[TurnRecordFrame]:
        """The frames to send after ``message``: the records it changed."""
        if message["type"] != "audit":
            return []
        turn_index = self._records.feed(message)
        event = message["event"]
        if turn_index is None or event not in RECORD_AUDITS:
            return []
        frames = []
        if event == "turn_started":
            corrected = self._records.reported_before(turn_index)  # by the effect ledger
            self._records.forget_before(turn_index)  # earlier turns are closed
            left_open = self._close_left_open(turn_index)
            frames = [_frame(self._records.corrected(interrupted(r))) for r in left_open]
            frames += [_frame(record) for record in corrected]
        record = self._records.record(turn_index)
        if event != "turn_started" or record.recovered_calls:
            frames.append(_frame(record))
        return frames

    def _close_left_open(self, turn_index: int) -> list[TurnRecord]:
        closing = [record for record in self._left_open if record.turn_index < turn_index]
        self._left_open = [record for record in self._left_open if record not in closing]
        return closing


def _frame(record: TurnRecord) -> TurnRecordFrame:
    return {
        "type": "turn_record",
        "turn_index": record.turn_index,
        "record": record.model_dump(mode="json"),
    }
