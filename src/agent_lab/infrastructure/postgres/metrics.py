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

from agent_lab.application.session_store import CallMetric
from agent_lab.infrastructure.postgres.connection import Conn, PgCore
from agent_lab.infrastructure.postgres.rows import (
    UPSERT_METRIC,
    require_session,
    select_metrics,
    select_turns,
)
from agent_lab.infrastructure.sqlite.blobs import (
    BLOB_KEY,
    CHAINED_KEYS,
    LIST_KEY,
    SHARED_KEYS,
    BlobCache,
    Packed,
    is_ref,
    restored,
)
from agent_lab.infrastructure.sqlite.records import now_iso, summarize
from agent_lab.infrastructure.sqlite.rows import metric_row
from agent_lab.infrastructure.store_common.audits import (
    AppendDelegates,
    AuditRecord,
    audit_dicts,
    pack_audits,
    turn_facts,
)


class MetricsRole(PgCore, AppendDelegates):
    """The audit trail (large values stored once) and call metrics."""

    def _insert_audits(self, session_id: str, records: list[AuditRecord]) -> int:
        cache = self._known_blobs.setdefault(session_id, BlobCache())
        packed, written, rows = pack_audits(cache, session_id, records)
        last = 0
        with self._write() as conn:
            self.writable(conn, session_id)
            _store(conn, session_id, packed)
            for row in rows:
                found = conn.execute(
                    "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                    " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    row,
                ).fetchone()
                last = int(found[0]) if found is not None else last
        cache.commit(packed, written)
        return last

    def list_audit_logs(
        self, session_id: str, *, after_id: int = 0, turn_index: int | None = None
    ) -> list[dict[str, Any]]:
        """Return the session's audit records in insertion order, details as appended
        (only those after ``after_id``, and of one turn when ``turn_index`` is given)."""
        query = (
            "SELECT id, turn_index, event, details, created_at FROM audit_logs"
            " WHERE session_id = %s AND id > %s"
        )
        parameters: tuple[Any, ...] = (session_id, after_id)
        if turn_index is not None:
            query += " AND turn_index = %s"
            parameters += (turn_index,)
        with self._read() as conn:
            require_session(conn, session_id)
            rows = conn.execute(query + " ORDER BY id", parameters).fetchall()
            details = _unpack_all(conn, session_id, [str(row[3]) for row in rows])
        return audit_dicts(rows, details)

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        """Record call metrics in one transaction (upsert by ``metric_key``)."""
        now = now_iso()
        rows = [metric_row(session_id, metric, now) for metric in metrics]
        with self._write() as conn:
            self.writable(conn, session_id)
            with conn.cursor() as cursor:
                cursor.executemany(UPSERT_METRIC, rows)

    def usage_summary(self, session_id: str) -> dict[str, Any]:
        """Return ``{"calls": [...], "turns": [...], "session": {...}}`` (DESIGN.md §7)."""
        with self._read() as conn:
            require_session(conn, session_id)
            calls = select_metrics(conn, session_id)
            turns = turn_facts(select_turns(conn, session_id))
        return summarize(calls, turns)


def _store(conn: Conn, session_id: str, packed: Packed) -> None:
    with conn.cursor() as cursor:
        if packed.blobs:
            cursor.executemany(
                "INSERT INTO audit_blobs (session_id, hash, body) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                [(session_id, digest, body) for digest, body in packed.blobs.items()],
            )
        if packed.nodes:
            cursor.executemany(
                "INSERT INTO audit_lists (session_id, hash, parent, item)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(session_id, node, *link) for node, link in packed.nodes.items()],
            )


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
