"""The ``MetricsStore`` role of the SQLite store: audits and call metrics."""

from __future__ import annotations

from typing import Any

from agent_lab.application.session_store import CallMetric
from agent_lab.infrastructure.sqlite.blobs import BlobCache, store, unpack_all
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.sqlite.records import now_iso, summarize
from agent_lab.infrastructure.sqlite.rows import (
    UPSERT_METRIC,
    metric_row,
    require_session,
    select_metrics,
    select_turns,
)
from agent_lab.infrastructure.store_common.audits import (
    AppendDelegates,
    AuditRecord,
    audit_dicts,
    pack_audits,
    turn_facts,
)


class MetricsRole(StoreCore, AppendDelegates):
    """The audit trail (large values stored once, see ``blobs``) and call metrics."""

    def _insert_audits(self, session_id: str, records: list[AuditRecord]) -> int:
        cache = self._known_blobs.setdefault(session_id, BlobCache())
        packed, written, rows = pack_audits(cache, session_id, records)
        with self._write() as conn:
            self.writable(conn, session_id)
            store(conn, session_id, packed)
            conn.executemany(
                "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            last = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        self._after_commit(lambda: cache.commit(packed, written))
        return int(last)

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
            require_session(conn, session_id)
            rows = conn.execute(query + " ORDER BY id", parameters).fetchall()
            details = unpack_all(conn, session_id, [row[3] for row in rows])
        return audit_dicts(rows, details)

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        """Record call metrics in one transaction (upsert by ``metric_key``).

        A replaced metric keeps its position and ``created_at``.
        """
        now = now_iso()
        rows = [metric_row(session_id, metric, now) for metric in metrics]
        with self._write() as conn:
            self.writable(conn, session_id)
            conn.executemany(UPSERT_METRIC, rows)

    def usage_summary(self, session_id: str) -> dict[str, Any]:
        """Return ``{"calls": [...], "turns": [...], "session": {...}}`` (DESIGN.md §7).

        ``model_calls`` counts chat, argument-fallback and argument-generation calls;
        ``tool_count`` counts tool executions; ``fallback_count`` counts
        argument fallbacks only. Each turn row carries its ``failure_reason`` and
        ``failure_message`` (``None`` unless the turn failed).
        """
        with self._read() as conn:
            require_session(conn, session_id)
            calls = select_metrics(conn, session_id)
            turns = turn_facts(select_turns(conn, session_id))
        return summarize(calls, turns)
