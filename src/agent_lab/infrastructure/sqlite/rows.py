"""Row helpers of the SQLite store: sessions, turns, messages and metrics.

Each function runs inside a transaction the caller opened (``StoreCore._write`` or
``_read``) and turns rows into the dicts the port returns.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

from agent_lab.application.session_store import CallMetric
from agent_lab.domain.errors import SessionNotFound
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.records import dumps, now_iso, session_title

METRIC_FIELDS: Final = tuple(CallMetric.model_fields)
RETURNING: Final = sqlite3.sqlite_version_info >= (3, 35, 0)
"""The linked SQLite knows ``RETURNING`` (older ones take one statement more)."""
MESSAGE_COLUMNS: Final = (
    "seq, turn_index, role, content, name, tool_call_id, tool_calls, created_at"
)
TURN_COLUMNS: Final = (
    "turn_index, status, wall_time_ms, round_count, user_message, failure_reason,"
    " failure_message, started_at, completed_at"
)

# -------------------------------------------------------------- sessions


def session_exists(conn: sqlite3.Connection, session_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return row is not None


def require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if not session_exists(conn, session_id):
        raise SessionNotFound(session_id)


def insert_session(conn: sqlite3.Connection, session_id: str, title: str, config: str) -> None:
    now = now_iso()
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (session_id, session_title(title), config, now, now),
    )


def touch(conn: sqlite3.Connection, session_id: str, now: str) -> None:
    conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))


SESSION_SELECT: Final = (
    "SELECT id, title, config, created_at, updated_at,"
    " (SELECT count(*) FROM turns WHERE session_id = sessions.id),"
    " (SELECT count(*) FROM messages WHERE session_id = sessions.id)"
    " FROM sessions"
)


def select_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"{SESSION_SELECT} WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else session_dict(row)


def session_dict(row: Sequence[Any]) -> dict[str, Any]:
    config = json.loads(row[2])
    return {
        "id": row[0],
        "title": row[1],
        "config": config,
        "created_at": row[3],
        "updated_at": row[4],
        "turn_count": row[5],
        "message_count": row[6],
        "mode": config.get("tool_invocation_mode") if isinstance(config, dict) else None,
    }


# -------------------------------------------------------------- turns


def turn_exists(conn: sqlite3.Connection, session_id: str, turn_index: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM turns WHERE session_id = ? AND turn_index = ?", (session_id, turn_index)
    ).fetchone()
    return row is not None


def select_turns(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY turn_index",
        (session_id,),
    ).fetchall()
    return turn_dicts(rows)


def turn_dicts(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """``list_turns`` entries from ``TURN_COLUMNS`` rows."""
    names = [name.strip() for name in TURN_COLUMNS.split(",")]
    return [dict(zip(names, row, strict=True)) for row in rows]


# -------------------------------------------------------------- messages

MessageFields = tuple[str, str, str | None, str | None, str]


def message_fields(message: ChatMessage) -> MessageFields:
    tool_calls = [call.model_dump() for call in message.tool_calls]
    return (
        message.role,
        message.content,
        message.name,
        message.tool_call_id,
        dumps(tool_calls, "tool calls"),
    )


def insert_messages(
    conn: sqlite3.Connection, session_id: str, turn_index: int, rows: list[MessageFields]
) -> list[int]:
    if not rows:
        return []
    now = now_iso()
    if len(rows) == 1 and RETURNING:  # the next seq found by the insert itself
        found = conn.execute(
            "INSERT INTO messages (session_id, seq, turn_index, role, content, name,"
            " tool_call_id, tool_calls, created_at)"
            " SELECT ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ?, ?, ?, ?"
            " FROM messages WHERE session_id = ? RETURNING seq",
            (session_id, turn_index, *rows[0], now, session_id),
        ).fetchall()
        touch(conn, session_id, now)
        return [int(found[0][0])]
    last = conn.execute(
        "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    seqs = list(range(int(last) + 1, int(last) + 1 + len(rows)))
    conn.executemany(
        "INSERT INTO messages (session_id, seq, turn_index, role, content, name,"
        " tool_call_id, tool_calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(session_id, seq, turn_index, *row, now) for seq, row in zip(seqs, rows, strict=True)],
    )
    touch(conn, session_id, now)
    return seqs


def message_dict(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "seq": row[0],
        "turn_index": row[1],
        "role": row[2],
        "content": row[3],
        "name": row[4],
        "tool_call_id": row[5],
        "tool_calls": json.loads(row[6]),
        "created_at": row[7],
    }


# -------------------------------------------------------------- metrics


UPSERT_METRIC: Final = (
    "INSERT INTO call_metrics (session_id, "
    + ", ".join(METRIC_FIELDS)
    + ", created_at) VALUES ("
    + ", ".join("?" for _ in range(len(METRIC_FIELDS) + 2))
    + ") ON CONFLICT (session_id, metric_key) DO UPDATE SET "
    + ", ".join(f"{field} = excluded.{field}" for field in METRIC_FIELDS)
)
"""The call-metric upsert (by ``metric_key``), with ``?`` parameters."""
METRIC_SELECT: Final = "SELECT " + ", ".join(METRIC_FIELDS) + ", created_at FROM call_metrics"


def metric_row(session_id: str, metric: CallMetric, now: str) -> tuple[Any, ...]:
    values = metric.model_dump()
    return (session_id, *(values[field] for field in METRIC_FIELDS), now)


def select_metrics(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    cursor = conn.execute(
        f"{METRIC_SELECT} WHERE session_id = ? ORDER BY id",
        (session_id,),
    )
    calls = [dict(zip((*METRIC_FIELDS, "created_at"), row, strict=True)) for row in cursor]
    for call in calls:
        call["usage_reported"] = bool(call["usage_reported"])
    return calls
