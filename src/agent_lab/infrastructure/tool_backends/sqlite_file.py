"""Short, durable SQLite transactions for the built-in tools' files.

Every call opens its own connection, so handlers running in worker threads never share
one. Files use WAL with ``synchronous=FULL``: a committed transaction is on stable
storage when ``transaction()`` returns. ``sqlite3`` and ``OSError`` failures leave this
module as ``BuiltinToolError``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_lab.application.builtin_backends import BuiltinToolError

_BUSY_TIMEOUT_SECONDS = 10.0
# Several tools share one file: its first-use setup (switching to WAL, creating tables)
# must not race between handler threads, since SQLite does not wait on a busy journal
# mode switch. Paths already set up in this process:
_SETUP_LOCK = threading.Lock()
_SET_UP: set[tuple[Path, str]] = set()


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
        self._key = (path.resolve(), schema)

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
        if self._key in _SET_UP:
            return
        with _SETUP_LOCK:
            if self._key not in _SET_UP:
                _switch_to_wal(connection)
                connection.executescript(self._schema)
                _SET_UP.add(self._key)


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    """``journal_mode=WAL``, retried while another process holds the file for a moment."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
