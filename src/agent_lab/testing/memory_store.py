"""``InMemorySessionStore``: the ``SessionStore`` port in process memory, for tests.

It is the SQLite store on SQLite's ``:memory:`` database, so it behaves exactly like
``agent_lab.infrastructure.sqlite_store.SQLiteSessionStore`` (the same dicts, ordering,
errors, JSON round trips, journal, claim and fencing rules) but keeps nothing after
the process ends or the store is closed, and never fails for disk reasons. It is
thread-safe; claims work between runtimes of one process that share it.

For example::

    store = InMemorySessionStore()
    runtime = DebugRuntime(client, session_store=store)
"""

from __future__ import annotations

from agent_lab.infrastructure.sqlite.connection import MEMORY
from agent_lab.infrastructure.sqlite.store import SQLiteSessionStore

__all__ = ["InMemorySessionStore"]


class InMemorySessionStore(SQLiteSessionStore):
    """A ``SessionStore`` that lives in memory; the SQLite store without a file."""

    WRITES_NOW = True  # nothing in memory waits: writes are made on the loop

    def __init__(self) -> None:
        super().__init__(MEMORY)

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"InMemorySessionStore({state})"
