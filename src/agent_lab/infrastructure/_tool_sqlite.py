"""Short, durable SQLite transactions for the built-in tools' files.

Every call opens its own connection, so handlers running in worker threads never share
one. Files use WAL with ``synchronous=FULL``: a committed transaction is on stable
storage when ``transaction()`` returns. ``sqlite3`` and ``OSError`` failures leave this
module as ``BuiltinToolError``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_lab.application.builtin_tools import BuiltinToolError

_BUSY_TIMEOUT_SECONDS = 10.0


@contextmanager
def map_storage_errors(path: Path) -> Iterator[None]:
    """Re-raise SQLite and file-system failures as ``BuiltinToolError``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise BuiltinToolError(f"tool storage {path} failed: {exc}") from exc
    except OSError as exc:
        raise BuiltinToolError(f"tool storage {path} is unavailable: {exc}") from exc


class ToolDatabase:
    """One SQLite file: its schema is created on first use, then short transactions."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._schema = schema
        self._ready = False
        self._lock = threading.Lock()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``), committed durably on success."""
        with map_storage_errors(self.path), self._connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """An autocommit connection for reads; each statement sees one snapshot."""
        with map_storage_errors(self.path), self._connection() as connection:
            yield connection

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            self._ensure_schema(connection)
            connection.execute("PRAGMA synchronous=FULL")
            yield connection
        finally:
            connection.close()

    def _ensure_schema(self, connection: sqlite3.Connection) -> None:
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.executescript(self._schema)
                self._ready = True
