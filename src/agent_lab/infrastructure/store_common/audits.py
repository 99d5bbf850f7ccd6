"""Audit rows and usage facts, built and read the same way by both stores.

The packing itself (message lists as chains, repeated values once, huge strings
capped) is ``sqlite.blobs``; ``SharedMetrics`` writes the packed values, lists the
audits and writes and sums the call metrics for both stores, which insert the audit
rows and put the packed values back with their own SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from agent_lab.application.session_store import CallMetric
from agent_lab.infrastructure.sqlite.blobs import BlobCache, Chained, Packed, pack
from agent_lab.infrastructure.sqlite.records import now_iso, summarize
from agent_lab.infrastructure.sqlite.rows import UPSERT_METRIC, metric_row
from agent_lab.infrastructure.store_common.hooks import StoreHooks

AuditRecord = tuple[int | None, str, dict[str, Any]]
"""``(turn_index, event, details)`` as appended."""


AuditRows = list[tuple[str, int | None, str, str, str]]
"""``audit_logs`` rows to insert: ``session_id, turn_index, event, details, created_at``."""


class PackedAudits(NamedTuple):
    """One audit write: the new blobs and nodes, the lists it chained, and its rows."""

    packed: Packed
    written: dict[str, list[Chained]]
    rows: AuditRows


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


class SharedMetrics(StoreHooks):
    """The ``MetricsStore`` methods both stores run the same way, over a store's hooks,
    its ``_insert_audit_rows`` (the audit rows and the id of the last) and
    ``_unpack_all`` (stored details with their values put back)."""

    def _insert_audit_rows(self, conn: Any, rows: AuditRows, *, last_id: bool) -> int:
        """Insert packed audit rows; return the id of the last (0 when ``last_id`` is
        false and the store need not read it)."""
        raise NotImplementedError

    def _unpack_all(self, conn: Any, session_id: str, texts: list[str]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def append_audit(
        self, session_id: str, turn_index: int | None, event: str, details: dict[str, Any]
    ) -> int:
        """Append one audit record; return its id (increasing, usable as an offset)."""
        return self._insert_audits(session_id, [(turn_index, event, details)], last_id=True)

    def append_audits(self, session_id: str, records: list[AuditRecord]) -> None:
        """Append ``(turn_index, event, details)`` records in one transaction."""
        self._insert_audits(session_id, records, last_id=False)

    def _insert_audits(self, session_id: str, records: list[AuditRecord], *, last_id: bool) -> int:
        """Write the records and their new packed values in one transaction; the session
        cache learns of the values once they are durable."""
        cache = self._known_blobs.setdefault(session_id, BlobCache())
        packed, written, rows = pack_audits(cache, session_id, records)
        with self._write() as conn:
            self.writable(conn, session_id)
            self._store_packed(conn, session_id, packed)
            last = self._insert_audit_rows(conn, rows, last_id=last_id)
        self._after_commit(lambda: cache.commit(packed, written))
        return last

    def _store_packed(self, conn: Any, session_id: str, packed: Packed) -> None:
        """Insert the new bodies and list nodes of one audit write."""
        if packed.blobs:
            self._executemany(
                conn,
                self._sql(
                    "INSERT INTO audit_blobs (session_id, hash, body) VALUES (?, ?, ?)"
                    " ON CONFLICT DO NOTHING"
                ),
                [(session_id, digest, body) for digest, body in packed.blobs.items()],
            )
        if packed.nodes:
            self._executemany(
                conn,
                self._sql(
                    "INSERT INTO audit_lists (session_id, hash, parent, item)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                [(session_id, node, *link) for node, link in packed.nodes.items()],
            )

    def list_audit_logs(
        self, session_id: str, *, after_id: int = 0, turn_index: int | None = None
    ) -> list[dict[str, Any]]:
        """Return the session's audit records in insertion order, details as appended.

        Args:
            session_id: The session.
            after_id: Only records whose ``id`` is greater (for tailing a live session).
            turn_index: Only the records of this turn (one turn's record is read
                without putting back every earlier request's message list).
        """
        query = (
            "SELECT id, turn_index, event, details, created_at FROM audit_logs"
            " WHERE session_id = ? AND id > ?"
        )
        parameters: tuple[Any, ...] = (session_id, after_id)
        if turn_index is not None:
            query += " AND turn_index = ?"
            parameters += (turn_index,)
        with self._read() as conn:
            self._rows().require_session(conn, session_id)
            rows = conn.execute(self._sql(query + " ORDER BY id"), parameters).fetchall()
            details = self._unpack_all(conn, session_id, [str(row[3]) for row in rows])
        return audit_dicts(rows, details)

    def append_usage(self, session_id: str, metric: CallMetric) -> None:
        """Record one call metric; a metric with the same key replaces the old one."""
        self.append_usages(session_id, [metric])

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        """Record call metrics in one transaction (upsert by ``metric_key``).

        A replaced metric keeps its position and ``created_at``.
        """
        now = now_iso()
        rows = [metric_row(session_id, metric, now) for metric in metrics]
        with self._write() as conn:
            self.writable(conn, session_id)
            self._executemany(conn, self._sql(UPSERT_METRIC), rows)

    def usage_summary(self, session_id: str) -> dict[str, Any]:
        """Return ``{"calls": [...], "turns": [...], "session": {...}}`` (DESIGN.md §7).

        ``model_calls`` counts chat, argument-fallback and argument-generation calls;
        ``tool_count`` counts tool executions; ``fallback_count`` counts
        argument fallbacks only. Each turn row carries its ``failure_reason`` and
        ``failure_message`` (``None`` unless the turn failed).
        """
        store_rows = self._rows()
        with self._read() as conn:
            store_rows.require_session(conn, session_id)
            calls = store_rows.select_metrics(conn, session_id)
            turns = turn_facts(store_rows.select_turns(conn, session_id))
        return summarize(calls, turns)
