"""The SQLite session store: one file, WAL mode, fenced single-writer claims.

The public import path is ``agent_lab.infrastructure.sqlite_store``.
"""
