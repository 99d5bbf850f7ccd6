"""Row helpers of the PostgreSQL store: sessions, turns, messages and metrics.

Each function runs inside a transaction the caller opened (``PgCore._write`` or
``_read``) and returns the same dicts as the SQLite store's ``rows``.
"""

from __future__ import annotations

from typing import Any

from agent_lab.domain.errors import SessionNotFound
from agent_lab.infrastructure.postgres.connection import Conn
from agent_lab.infrastructure.sqlite.records import now_iso, session_title
from agent_lab.infrastructure.sqlite.rows import (
    METRIC_FIELDS,
    METRIC_SELECT,
    SESSION_SELECT,
    TURN_COLUMNS,
    MessageFields,
    session_dict,
    turn_dicts,
)


def session_exists(conn: Conn, session_id: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is not None
    )


def require_session(conn: Conn, session_id: str) -> None:
    if not session_exists(conn, session_id):
        raise SessionNotFound(session_id)


def insert_session(
    conn: Conn, session_id: str, title: str, config: str, *, if_missing: bool = False
) -> None:
    """Insert a session row; with ``if_missing`` an existing one (even one another
    worker inserts concurrently) is kept as it is."""
    now = now_iso()
    conflict = " ON CONFLICT (id) DO NOTHING" if if_missing else ""
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s)" + conflict,
        (session_id, session_title(title), config, now, now),
    )


def touch(conn: Conn, session_id: str, now: str) -> None:
    conn.execute("UPDATE sessions SET updated_at = %s WHERE id = %s", (now, session_id))


def select_session(conn: Conn, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"{SESSION_SELECT} WHERE id = %s", (session_id,)).fetchone()
    return None if row is None else session_dict(row)


def turn_exists(conn: Conn, session_id: str, turn_index: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM turns WHERE session_id = %s AND turn_index = %s", (session_id, turn_index)
    ).fetchone()
    return row is not None


def select_turns(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = %s ORDER BY turn_index",
        (session_id,),
    ).fetchall()
    return turn_dicts(rows)


def insert_messages(
    conn: Conn, session_id: str, turn_index: int, rows: list[MessageFields]
) -> list[int]:
    """Append rows after the session's last ``seq`` (the caller holds the session lock)."""
    if not rows:
        return []
    found = conn.execute(
        "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = %s", (session_id,)
    ).fetchone()
    last = int(found[0]) if found is not None else 0
    seqs = list(range(last + 1, last + 1 + len(rows)))
    now = now_iso()
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO messages (session_id, seq, turn_index, role, content, name,"
            " tool_call_id, tool_calls, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(session_id, seq, turn_index, *row, now) for seq, row in zip(seqs, rows, strict=True)],
        )
    touch(conn, session_id, now)
    return seqs


def select_metrics(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"{METRIC_SELECT} WHERE session_id = %s ORDER BY id",
        (session_id,),
    ).fetchall()
    return [dict(zip((*METRIC_FIELDS, "created_at"), row, strict=True)) for row in rows]
