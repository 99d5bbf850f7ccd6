"""The ``BatchJournal`` role of the PostgreSQL store: the write-ahead tool journal.

The ledger's methods and rules are the SQLite store's (``store_common.ledger``); here
they run with ``%s`` parameters, and every write takes the session's row lock and
checks the claim fence in its own transaction (see ``connection``) before it reads the
batch.
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.postgres import rows as store_rows
from agent_lab.infrastructure.postgres.connection import Conn, PgCore
from agent_lab.infrastructure.store_common.hooks import StoreRows
from agent_lab.infrastructure.store_common.ledger import Ledger


class SqlCore(PgCore):
    """The PostgreSQL side of ``StoreHooks``: ``?`` becomes ``%s``, ``postgres.rows``."""

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _rows(self) -> StoreRows:
        return store_rows

    def _executemany(self, conn: Conn, statement: str, batch: list[tuple[Any, ...]]) -> None:
        with conn.cursor() as cursor:
            cursor.executemany(statement, batch)


class JournalRole(SqlCore, Ledger):
    """The shared ``Ledger`` on PostgreSQL, whose ``fence`` takes the session's row lock."""
