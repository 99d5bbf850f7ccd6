"""The ``BatchJournal`` role of the PostgreSQL store: the write-ahead tool journal.

The ledger's methods and rules are the SQLite store's (``store_common.ledger``); here
they run with ``%s`` parameters, and every write takes the session's row lock and
checks the claim fence in its own transaction (see ``connection``) before it reads the
batch. The statements other roles run inside their own transactions (cancelling
pending batches, rendering uncommitted ones) are kept here.
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.postgres import rows as store_rows
from agent_lab.infrastructure.postgres.connection import Conn, PgCore
from agent_lab.infrastructure.store_common.hooks import StoreRows
from agent_lab.infrastructure.store_common.journal import rendered_batch
from agent_lab.infrastructure.store_common.ledger import Ledger


class SqlCore(PgCore):
    """The PostgreSQL side of ``StoreHooks``: ``?`` becomes ``%s``, ``postgres.rows``."""

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _rows(self) -> StoreRows:
        return store_rows


class JournalRole(SqlCore, Ledger):
    """The shared ``Ledger`` on PostgreSQL, whose ``fence`` takes the session's row lock."""

    def _executemany(self, conn: Conn, statement: str, batch: list[tuple[Any, ...]]) -> None:
        with conn.cursor() as cursor:
            cursor.executemany(statement, batch)

    def _abandon(self, conn: Conn, batch_ids: list[str], state: str, now: str) -> None:
        abandon(conn, batch_ids, state, now)


def pending_batch_ids(conn: Conn, session_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM tool_batches WHERE session_id = %s AND state = 'pending'", (session_id,)
    ).fetchall()
    return [str(row[0]) for row in rows]


def abandon(conn: Conn, batch_ids: list[str], state: str, now: str) -> None:
    for batch_id in batch_ids:
        conn.execute(
            "UPDATE tool_batches SET state = %s, finished_at = %s WHERE id = %s",
            (state, now, batch_id),
        )
        conn.execute(
            "UPDATE tool_calls SET landed_at = %s,"
            " state = CASE state WHEN 'dispatched' THEN 'unknown' ELSE 'cancelled' END"
            " WHERE batch_id = %s AND result IS NULL AND state IN ('pending', 'dispatched')",
            (now, batch_id),
        )


def uncommitted_messages(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """The uncommitted batches rendered as messages (``list_messages(include_pending)``)."""
    rendered: list[dict[str, Any]] = []
    batches = conn.execute(
        "SELECT id, turn_index, state, assistant, created_at FROM tool_batches"
        " WHERE session_id = %s AND state != 'committed' ORDER BY seq",
        (session_id,),
    ).fetchall()
    for batch_id, turn_index, state, assistant, created_at in batches:
        results = conn.execute(
            "SELECT result, landed_at FROM tool_calls"
            " WHERE batch_id = %s AND result IS NOT NULL ORDER BY position",
            (batch_id,),
        ).fetchall()
        rendered.extend(rendered_batch(turn_index, state, assistant, created_at, results))
    return rendered
