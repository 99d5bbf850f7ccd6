"""The ``BatchJournal`` role of the SQLite store: the write-ahead tool journal.

The ledger's methods and rules are shared with the PostgreSQL store
(``store_common.ledger``); this module runs them on SQLite, whose writes are
serialised by ``BEGIN IMMEDIATE``, and keeps the statements other roles run inside
their own transactions (cancelling pending batches, rendering uncommitted ones).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_lab.infrastructure.sqlite import rows as store_rows
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.store_common.hooks import StoreRows
from agent_lab.infrastructure.store_common.journal import rendered_batch
from agent_lab.infrastructure.store_common.ledger import Ledger


class SqlCore(StoreCore):
    """The SQLite side of ``StoreHooks``: ``?`` parameters as written, ``sqlite.rows``."""

    def _sql(self, statement: str) -> str:
        return statement

    def _rows(self) -> StoreRows:
        return store_rows


class JournalRole(SqlCore, Ledger):
    """The shared ``Ledger`` on SQLite."""

    def _executemany(
        self, conn: sqlite3.Connection, statement: str, batch: list[tuple[Any, ...]]
    ) -> None:
        conn.executemany(statement, batch)

    def _abandon(
        self, conn: sqlite3.Connection, batch_ids: list[str], state: str, now: str
    ) -> None:
        abandon(conn, batch_ids, state, now)


def pending_batch_ids(conn: sqlite3.Connection, session_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM tool_batches WHERE session_id = ? AND state = 'pending'", (session_id,)
    )
    return [str(row[0]) for row in rows]


def abandon(conn: sqlite3.Connection, batch_ids: list[str], state: str, now: str) -> None:
    for batch_id in batch_ids:
        conn.execute(
            "UPDATE tool_batches SET state = ?, finished_at = ? WHERE id = ?",
            (state, now, batch_id),
        )
        conn.execute(
            "UPDATE tool_calls SET landed_at = ?,"
            " state = CASE state WHEN 'dispatched' THEN 'unknown' ELSE 'cancelled' END"
            " WHERE batch_id = ? AND result IS NULL AND state IN ('pending', 'dispatched')",
            (now, batch_id),
        )


def uncommitted_messages(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """The uncommitted batches rendered as messages (``list_messages(include_pending)``)."""
    rendered: list[dict[str, Any]] = []
    batches = conn.execute(
        "SELECT id, turn_index, state, assistant, created_at FROM tool_batches"
        " WHERE session_id = ? AND state != 'committed' ORDER BY seq",
        (session_id,),
    ).fetchall()
    for batch_id, turn_index, state, assistant, created_at in batches:
        results = conn.execute(
            "SELECT result, landed_at FROM tool_calls"
            " WHERE batch_id = ? AND result IS NOT NULL ORDER BY position",
            (batch_id,),
        )
        rendered.extend(rendered_batch(turn_index, state, assistant, created_at, results))
    return rendered
