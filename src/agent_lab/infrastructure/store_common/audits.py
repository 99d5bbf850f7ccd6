"""Audit rows and usage facts, built and read the same way by both stores.

The packing itself (message lists as chains, repeated values once, huge strings
capped) is ``sqlite.blobs``; each store writes the packed rows and reads them back
with its own SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from agent_lab.application.session_store import CallMetric
from agent_lab.infrastructure.sqlite.blobs import BlobCache, Chained, Packed, pack
from agent_lab.infrastructure.sqlite.records import now_iso

AuditRecord = tuple[int | None, str, dict[str, Any]]
"""``(turn_index, event, details)`` as appended."""


class PackedAudits(NamedTuple):
    """One audit write: the new blobs and nodes, the lists it chained, and its rows."""

    packed: Packed
    written: dict[str, list[Chained]]
    rows: list[tuple[str, int | None, str, str, str]]


def pack_audits(cache: BlobCache, session_id: str, records: list[AuditRecord]) -> PackedAudits:
    """Pack ``records`` against what ``cache`` knows is committed.

    Hand ``packed`` and ``written`` to ``cache.commit`` once the rows are durable.

    Raises:
        UsageError: a value cannot be stored as JSON.
    """
    now = now_iso()
    packed = Packed()
    cache.pending = {}  # nothing of a failed earlier write is reused
    rows = [
        (session_id, turn, event, pack(details, f"audit {event!r} details", packed, cache), now)
        for turn, event, details in records
    ]
    written, cache.pending = cache.pending, {}
    return PackedAudits(packed, written, rows)


def audit_dicts(
    rows: Iterable[Sequence[Any]], details: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``list_audit_logs`` entries from ``id, turn_index, event, details, created_at`` rows."""
    return [
        {
            "id": row[0],
            "turn_index": row[1],
            "event": row[2],
            "details": unpacked,
            "created_at": row[4],
        }
        for row, unpacked in zip(rows, details, strict=True)
    ]


def turn_facts(turns: Iterable[dict[str, Any]]) -> dict[int, Any]:
    """What ``summarize`` needs of each turn (``list_turns`` rows), by turn index."""
    return {
        turn["turn_index"]: (
            turn["status"],
            turn["wall_time_ms"],
            turn["round_count"],
            turn["user_message"],
            turn["failure_reason"],
            turn["failure_message"],
        )
        for turn in turns
    }


class AppendDelegates:
    """The single-record and batch forms of the ``MetricsStore`` writes, over the
    store's ``_insert_audits`` and ``append_usages``."""

    def append_audit(
        self, session_id: str, turn_index: int | None, event: str, details: dict[str, Any]
    ) -> int:
        """Append one audit record; return its id (increasing, usable as an offset)."""
        return self._insert_audits(session_id, [(turn_index, event, details)])

    def append_audits(self, session_id: str, records: list[AuditRecord]) -> None:
        """Append ``(turn_index, event, details)`` records in one transaction."""
        self._insert_audits(session_id, records)

    def append_usage(self, session_id: str, metric: CallMetric) -> None:
        """Record one call metric; a metric with the same key replaces the old one."""
        self.append_usages(session_id, [metric])

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        raise NotImplementedError

    def _insert_audits(self, session_id: str, records: list[AuditRecord]) -> int:
        """Write the records in one transaction; return the id of the last."""
        raise NotImplementedError
