"""The turn record (DESIGN.md §10): one versioned, append-only account per turn.

Build it live with ``LiveRecords`` (from a session's output messages) or reopened with
``session_records`` (from the store's rows); both give the same ``TurnRecord``.
"""

from agent_lab.application.record.fold import TurnRecordBuilder
from agent_lab.application.record.model import (
    RECORD_VERSION,
    CallTimings,
    CostRecord,
    CostSummary,
    EventRecord,
    FailureRecord,
    ModelCallRecord,
    RecordEntry,
    RecoveredCallRecord,
    RequestRef,
    RoundRecord,
    ToolExecutionRecord,
    TurnRecord,
)
from agent_lab.application.record.reading import (
    LiveRecords,
    interrupted,
    request_sent,
    session_records,
    turn_audits,
    unreported_calls,
)

__all__ = [
    "RECORD_VERSION",
    "CallTimings",
    "CostRecord",
    "CostSummary",
    "EventRecord",
    "FailureRecord",
    "LiveRecords",
    "ModelCallRecord",
    "RecordEntry",
    "RecoveredCallRecord",
    "RequestRef",
    "RoundRecord",
    "ToolExecutionRecord",
    "TurnRecord",
    "TurnRecordBuilder",
    "interrupted",
    "request_sent",
    "session_records",
    "turn_audits",
    "unreported_calls",
]
