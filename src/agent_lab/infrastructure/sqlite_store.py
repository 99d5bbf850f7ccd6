"""``SQLiteSessionStore``: the durable session store on one SQLite file.

The implementation lives in :mod:`agent_lab.infrastructure.sqlite`; this module is the
public import path.
"""

from agent_lab.infrastructure.sqlite.store import SQLiteSessionStore, Synchronous

__all__ = ["SQLiteSessionStore", "Synchronous"]
