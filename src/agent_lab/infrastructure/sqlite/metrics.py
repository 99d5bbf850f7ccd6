"""The ``MetricsStore`` role of the SQLite store: audits and call metrics.

Most of it is ``store_common.audits``; here are inserting the audit rows and reading
their packed values back (``blobs``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_lab.infrastructure.sqlite.blobs import BlobCache, unpack_all
from agent_lab.infrastructure.sqlite.journal import SqlCore
from agent_lab.infrastructure.store_common.audits import AuditRecord, SharedMetrics, pack_audits


class MetricsRole(SqlCore, SharedMetrics):
    """The audit trail (large values stored once, see ``blobs``) and call metrics."""

    def _insert_audits(
        self, session_id: str, records: list[AuditRecord], *, last_id: bool = True
    ) -> int:
        cache = self._known_blobs.setdefault(session_id, BlobCache())
        packed, written, rows = pack_audits(cache, session_id, records)
        last = 0
        with self._write() as conn:
            self.writable(conn, session_id)
            self._store_packed(conn, session_id, packed)
            conn.executemany(
                "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            if last_id:
                last = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        self._after_commit(lambda: cache.commit(packed, written))
        return int(last)

    def append_audits(self, session_id: str, records: list[AuditRecord]) -> None:
        """Append ``(turn_index, event, details)`` records in one transaction."""
        self._insert_audits(session_id, records, last_id=False)

    def _unpack_all(
        self, conn: sqlite3.Connection, session_id: str, texts: list[str]
    ) -> list[dict[str, Any]]:
        return unpack_all(conn, session_id, texts)
