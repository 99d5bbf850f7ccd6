"""The ``MetricsStore`` role of the PostgreSQL store: audits and call metrics.

Audit details are packed exactly as in the SQLite store (``sqlite.blobs``: message
lists as chains of nodes, repeated values once per session, huge strings capped), so
``list_audit_logs`` returns the details as appended. Reading fetches a session's nodes
and bodies in one query each instead of one row at a time.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from agent_lab.infrastructure.postgres.connection import Conn
from agent_lab.infrastructure.postgres.journal import SqlCore
from agent_lab.infrastructure.sqlite.blobs import (
    BLOB_KEY,
    CHAINED_KEYS,
    LIST_KEY,
    SHARED_KEYS,
    is_ref,
    restored,
)
from agent_lab.infrastructure.store_common.audits import AuditRows, SharedMetrics


class MetricsRole(SqlCore, SharedMetrics):
    """The audit trail (large values stored once) and call metrics."""

    def _insert_audit_rows(self, conn: Conn, rows: AuditRows, *, last_id: bool) -> int:
        last = 0
        for row in rows:
            found = conn.execute(
                "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                row,
            ).fetchone()
            last = int(found[0]) if found is not None else last
        return last

    def _unpack_all(self, conn: Conn, session_id: str, texts: list[str]) -> list[dict[str, Any]]:
        return _unpack_all(conn, session_id, texts)


def _refs(decoded: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The list heads and blob hashes the details refer to."""
    heads: set[str] = set()
    blobs: set[str] = set()
    for details in decoded:
        for key, value in details.items():
            if key in CHAINED_KEYS and is_ref(value, LIST_KEY):
                heads.add(str(value[LIST_KEY]))
            elif key in SHARED_KEYS:
                values = value if isinstance(value, list) else [value]
                blobs.update(str(item[BLOB_KEY]) for item in values if is_ref(item, BLOB_KEY))
    return heads, blobs


_CHAIN_QUERY = (
    "WITH RECURSIVE chain (hash, parent, item) AS ("
    " SELECT hash, parent, item FROM audit_lists WHERE session_id = %(s)s AND hash = ANY(%(h)s)"
    " UNION SELECT l.hash, l.parent, l.item FROM audit_lists l JOIN chain c"
    " ON l.session_id = %(s)s AND l.hash = c.parent)"
    " SELECT hash, parent, item FROM chain"
)


def _unpack_all(conn: Conn, session_id: str, texts: list[str]) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = [json.loads(text) for text in texts]
    heads, wanted = _refs(decoded)
    if not heads and not wanted:
        return decoded
    nodes: dict[str, tuple[str, str]] = {}
    if heads:
        rows = conn.execute(_CHAIN_QUERY, {"s": session_id, "h": sorted(heads)}).fetchall()
        nodes = {str(digest): (str(parent), str(item)) for digest, parent, item in rows}
    wanted.update(item for _, item in nodes.values())
    found = conn.execute(
        "SELECT hash, body FROM audit_blobs WHERE session_id = %s AND hash = ANY(%s)",
        (session_id, sorted(wanted)),
    ).fetchall()
    bodies = {str(digest): str(body) for digest, body in found}
    return [
        restored(details, partial(_chain, nodes), lambda digest: json.loads(bodies[digest]))
        for details in decoded
    ]


def _chain(nodes: dict[str, tuple[str, str]], node: str) -> list[str]:
    items: list[str] = []
    while node:
        node, item = nodes[node]
        items.append(item)
    items.reverse()
    return items
