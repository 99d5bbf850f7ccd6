"""The ``MetricsStore`` role of the SQLite store: audits and call metrics.

Most of it is ``store_common.audits``; here are inserting the audit rows and reading
their packed values back (``blobs``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_lab.infrastructure.sqlite.blobs import unpack_all
from agent_lab.infrastructure.sqlite.journal import SqlCore
from agent_lab.infrastructure.store_common.audits import AuditRows, SharedMetrics


class MetricsRole(SqlCore, SharedMetrics):
    """The audit trail (large values stored once, see ``blobs``) and call metrics."""

    def _insert_audit_rows(
        self, conn: sqlite3.Connection, rows: AuditRows, *, last_id: bool
    ) -> int:
        conn.executemany(
            "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        return int(conn.execute("SELECT last_insert_rowid()").fetchone()[0]) if last_id else 0

    def _unpack_all(
        self, conn: sqlite3.Connection, session_id: str, texts: list[str]
    ) -> list[dict[str, Any]]:
        return unpack_all(conn, session_id, texts)
