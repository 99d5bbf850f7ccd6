"""The ``BatchJournal`` role of the SQLite store: the write-ahead tool journal.

It is an effect ledger (DESIGN.md §9.4): each call is journaled ``pending`` with its
idempotency key when the batch opens, ``dispatched`` (with its final arguments) right
before its handler runs, then gets its outcome. Abandoning a batch turns dispatched
calls without an outcome into ``unknown`` and pending ones into ``cancelled``. Batches
whose effects the model was not told about (abandoned ones, and committed ones of a
turn that never finished) are ``list_unreported_batches`` until ``mark_reported``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_lab.application.session_store import BatchIntent, BatchJournal, BatchState, CallStatus
from agent_lab.domain.errors import UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.connection import StoreCore
from agent_lab.infrastructure.sqlite.records import dumps, message_json, now_iso
from agent_lab.infrastructure.sqlite.rows import insert_messages, message_fields, require_session
from agent_lab.infrastructure.store_common.journal import (
    BATCH_COLUMNS,
    CALL_COLUMNS,
    batch_dict,
    check_abandon_state,
    check_call_status,
    check_pending,
    opened_batch,
    rendered_batch,
    unknown_batch,
)


class JournalRole(StoreCore, BatchJournal):
    """Tool batches: pending before dispatch, results as they land, commit or abandon."""

    def open_batch(self, session_id: str, intent: BatchIntent) -> str:
        """Journal a tool batch as pending before any of its tools runs; return its id.

        In one transaction: the batch (with the assistant tool-call message, if
        given), one pending call per event in order, and the ``visible`` messages
        appended to the committed transcript. ``begin_batch`` is the keyword form.

        Raises:
            UsageError: two events share an id.
        """
        opened = opened_batch(session_id, intent)
        with self._write() as conn:
            self.writable(conn, session_id)
            conn.execute(
                "INSERT INTO tool_batches (id, session_id, turn_index, round_index, scope,"
                " mode, state, assistant, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (*opened.batch, now_iso()),
            )
            conn.executemany(
                "INSERT INTO tool_calls (batch_id, position, event, event_id,"
                " idempotency_key, state) VALUES (?, ?, ?, ?, ?, 'pending')",
                opened.calls,
            )
            if opened.visible:
                insert_messages(conn, session_id, intent.turn_index, opened.visible)
        return opened.batch_id

    def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        """Record one call's outcome durably (before it is shown to anyone).

        Raises:
            UsageError: unknown batch or event, a bad status, or the batch is no longer
                pending.
        """
        check_call_status(status)
        result_json = message_json(result)
        with self._write() as conn:
            self._pending_batch(conn, batch_id, "record a result in")
            updated = conn.execute(
                "UPDATE tool_calls SET state = ?, result = ?, landed_at = ?"
                " WHERE batch_id = ? AND event_id = ?",
                (status, result_json, now_iso(), batch_id, event_id),
            )
            if updated.rowcount == 0:
                raise UsageError(f"tool batch {batch_id!r} has no call {event_id!r}")

    def mark_dispatched(self, batch_id: str, event_id: str, arguments: dict[str, Any]) -> None:
        """Record that a pending call's handler is about to run, with its final arguments.

        Raises:
            UsageError: unknown batch or call, the batch is no longer pending, or the
                call was dispatched before.
        """
        arguments_json = dumps(arguments, f"arguments of tool call {event_id!r}")
        with self._write() as conn:
            self._pending_batch(conn, batch_id, "dispatch a call of")
            updated = conn.execute(
                "UPDATE tool_calls SET state = 'dispatched', arguments = ?, dispatched_at = ?"
                " WHERE batch_id = ? AND event_id = ? AND state = 'pending'",
                (arguments_json, now_iso(), batch_id, event_id),
            )
            if updated.rowcount == 0:
                raise UsageError(f"tool batch {batch_id!r} has no pending call {event_id!r}")

    def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        """Append ``messages`` to the visible transcript and mark the batch committed.

        Raises:
            UsageError: unknown batch, or the batch is no longer pending.
        """
        rows = [message_fields(message) for message in messages]
        with self._write() as conn:
            session_id, turn_index = self._pending_batch(conn, batch_id, "commit")
            insert_messages(conn, session_id, turn_index, rows)
            conn.execute(
                "UPDATE tool_batches SET state = 'committed', finished_at = ? WHERE id = ?",
                (now_iso(), batch_id),
            )

    def abandon_batch(self, batch_id: str, state: BatchState = "cancelled") -> None:
        """Mark a pending batch ``cancelled`` or ``failed``.

        Calls that already have a result keep it; dispatched calls without one become
        ``unknown`` (their effect may have happened), pending ones ``cancelled``. A batch
        that is no longer pending is left as it is, so cleanup code may call this
        unconditionally.

        Raises:
            UsageError: unknown batch, or ``state`` is not ``cancelled`` / ``failed``.
        """
        check_abandon_state(state)
        with self._write() as conn:
            session_id, current = _batch_row(conn, batch_id)
            self.fence(conn, session_id)
            if current == "pending":
                abandon(conn, [batch_id], state, now_iso())

    def list_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's tool journal, oldest batch first, each with its calls."""
        with self._read() as conn:
            require_session(conn, session_id)
            batches = conn.execute(
                f"SELECT {BATCH_COLUMNS} FROM tool_batches AS b"
                " WHERE b.session_id = ? ORDER BY b.seq",
                (session_id,),
            ).fetchall()
            return [_batch_dict(conn, row) for row in batches]

    def list_unreported_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Batches whose effects the model has not been told about, oldest first.

        Abandoned batches, and committed batches of a turn that never finished (its
        runtime died), not yet ``mark_reported``; rows as in ``list_batches``.
        """
        with self._read() as conn:
            require_session(conn, session_id)
            batches = conn.execute(
                f"SELECT {BATCH_COLUMNS} FROM tool_batches AS b"
                " WHERE b.session_id = ? AND b.reported_turn IS NULL AND b.state != 'pending'"
                " AND (b.state != 'committed' OR EXISTS (SELECT 1 FROM turns AS t"
                "  WHERE t.session_id = b.session_id AND t.turn_index = b.turn_index"
                "  AND t.completed_at IS NULL))"
                " ORDER BY b.seq",
                (session_id,),
            ).fetchall()
            return [_batch_dict(conn, row) for row in batches]

    def mark_reported(self, batch_ids: list[str], turn_index: int) -> None:
        """Record that the model was told about these batches in ``turn_index``."""
        with self._write() as conn:
            for batch_id in batch_ids:
                session_id, _ = _batch_row(conn, batch_id)
                self.fence(conn, session_id)
                conn.execute(
                    "UPDATE tool_batches SET reported_turn = ?"
                    " WHERE id = ? AND reported_turn IS NULL",
                    (turn_index, batch_id),
                )

    def _pending_batch(
        self, conn: sqlite3.Connection, batch_id: str, action: str
    ) -> tuple[str, int]:
        row = conn.execute(
            "SELECT session_id, turn_index, state FROM tool_batches WHERE id = ?", (batch_id,)
        ).fetchone()
        if row is None:
            raise unknown_batch(batch_id)
        self.fence(conn, str(row[0]))
        check_pending(batch_id, action, row[2])
        return str(row[0]), int(row[1])


def _batch_row(conn: sqlite3.Connection, batch_id: str) -> tuple[str, str]:
    row = conn.execute(
        "SELECT session_id, state FROM tool_batches WHERE id = ?", (batch_id,)
    ).fetchone()
    if row is None:
        raise unknown_batch(batch_id)
    return str(row[0]), str(row[1])


def pending_batch_ids(conn: sqlite3.Connection, session_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM tool_batches WHERE session_id = ? AND state = 'pending'", (session_id,)
    )
    return [str(row[0]) for row in rows]


def abandon(conn: sqlite3.Connection, batch_ids: list[str], state: str, now: str) -> None:
    for batch_id in batch_ids:
        conn.execute(
            "UPDATE tool_batches SET state = ?, finished_at = ? WHERE id = ?",
            (state, now, batch_id),
        )
        conn.execute(
            "UPDATE tool_calls SET landed_at = ?,"
            " state = CASE state WHEN 'dispatched' THEN 'unknown' ELSE 'cancelled' END"
            " WHERE batch_id = ? AND result IS NULL AND state IN ('pending', 'dispatched')",
            (now, batch_id),
        )


def uncommitted_messages(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    """The uncommitted batches rendered as messages (``list_messages(include_pending)``)."""
    rendered: list[dict[str, Any]] = []
    batches = conn.execute(
        "SELECT id, turn_index, state, assistant, created_at FROM tool_batches"
        " WHERE session_id = ? AND state != 'committed' ORDER BY seq",
        (session_id,),
    ).fetchall()
    for batch_id, turn_index, state, assistant, created_at in batches:
        results = conn.execute(
            "SELECT result, landed_at FROM tool_calls"
            " WHERE batch_id = ? AND result IS NOT NULL ORDER BY position",
            (batch_id,),
        )
        rendered.extend(rendered_batch(turn_index, state, assistant, created_at, results))
    return rendered


def _batch_dict(conn: sqlite3.Connection, row: Sequence[Any]) -> dict[str, Any]:
    calls = conn.execute(
        f"SELECT {CALL_COLUMNS} FROM tool_calls WHERE batch_id = ? ORDER BY position",
        (row[0],),
    )
    return batch_dict(row, calls)
