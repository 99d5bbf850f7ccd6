"""The ``BatchJournal`` role of the SQLite store: the write-ahead tool journal.

The ledger's methods and rules are shared with the PostgreSQL store
(``store_common.ledger``); this module runs them on SQLite, whose writes are
serialised by ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_lab.infrastructure.sqlite import rows as store_rows
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.store_common.hooks import StoreRows
from agent_lab.infrastructure.store_common.ledger import Ledger


class SqlCore(StoreCore):
    """The SQLite side of ``StoreHooks``: ``?`` parameters as written, ``sqlite.rows``."""

    def _sql(self, statement: str) -> str:
        return statement

    def _rows(self) -> StoreRows:
        return store_rows

    def _executemany(
        self, conn: sqlite3.Connection, statement: str, batch: list[tuple[Any, ...]]
    ) -> None:
        conn.executemany(statement, batch)


class JournalRole(SqlCore, Ledger):
    """The shared ``Ledger`` on SQLite."""
