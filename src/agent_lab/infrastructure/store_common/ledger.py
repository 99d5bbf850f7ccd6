"""The ``BatchJournal`` methods, written once for both stores (DESIGN.md §9.4).

Each call is journaled ``pending`` with its idempotency key when the batch opens,
``dispatched`` (with its final arguments) right before its handler runs, then gets its
outcome. Abandoning a batch turns dispatched calls without an outcome into ``unknown``
and pending ones into ``cancelled``. Batches whose effects the model was not told about
(abandoned ones, and committed ones of a turn that never finished) are
``list_unreported_batches`` until ``mark_reported``.

The statements are written with ``?`` parameters; a store runs them through its
``_sql`` (the PostgreSQL store turns them into ``%s``) inside its own transactions
(``_write`` / ``_read``), and its ``fence`` locks and checks the session's claim. Every
batch's session is fenced before the batch's state is read.
"""

from __future__ import annotations

from typing import Any

from agent_lab.application.session_store import (
    INTERRUPTED_REASON,
    BatchIntent,
    BatchJournal,
    BatchState,
    CallStatus,
)
from agent_lab.domain.errors import UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.records import dumps, message_json, now_iso
from agent_lab.infrastructure.sqlite.rows import message_fields
from agent_lab.infrastructure.store_common.batches import BatchStatements
from agent_lab.infrastructure.store_common.journal import (
    BATCH_COLUMNS,
    CALL_COLUMNS,
    batch_dict,
    check_abandon_state,
    check_call_status,
    check_pending,
    opened_batch,
    unknown_batch,
)

_UNREPORTED = (
    " AND b.reported_turn IS NULL AND b.state != 'pending'"
    " AND (b.state != 'committed' OR EXISTS (SELECT 1 FROM turns AS t"
    "  WHERE t.session_id = b.session_id AND t.turn_index = b.turn_index"
    f"  AND (t.completed_at IS NULL OR t.failure_reason = '{INTERRUPTED_REASON}')))"
)
"""Abandoned batches, and committed ones of a turn that never finished: still open, or
closed as interrupted by the runtime that took the session over (its own runtime
never ended it)."""


class Ledger(BatchStatements, BatchJournal):
    """Tool batches: pending before dispatch, results as they land, commit or abandon.

    A store provides ``StoreHooks`` (its connection type is its own, hence ``Any``).
    """

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
                self._sql(
                    "INSERT INTO tool_batches (id, session_id, turn_index, round_index, scope,"
                    " mode, state, assistant, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
                ),
                (*opened.batch, now_iso()),
            )
            self._executemany(
                conn,
                self._sql(
                    "INSERT INTO tool_calls (batch_id, position, event, event_id,"
                    " idempotency_key, state) VALUES (?, ?, ?, ?, ?, 'pending')"
                ),
                list(opened.calls),
            )
            if opened.visible:
                self._rows().insert_messages(conn, session_id, intent.turn_index, opened.visible)
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
        self._update_call(
            batch_id,
            event_id,
            "record a result in",
            "state = ?, result = ?, landed_at = ?",
            (status, result_json, now_iso()),
        )

    def mark_dispatched(self, batch_id: str, event_id: str, arguments: dict[str, Any]) -> None:
        """Record that a pending call's handler is about to run, with its final arguments.

        Raises:
            UsageError: unknown batch or call, the batch is no longer pending, or the
                call was dispatched before.
        """
        arguments_json = dumps(arguments, f"arguments of tool call {event_id!r}")
        self._update_call(
            batch_id,
            event_id,
            "dispatch a call of",
            "state = 'dispatched', arguments = ?, dispatched_at = ?",
            (arguments_json, now_iso()),
            pending_only=True,
        )

    def _update_call(
        self,
        batch_id: str,
        event_id: str,
        action: str,
        assignments: str,
        values: tuple[Any, ...],
        *,
        pending_only: bool = False,
    ) -> None:
        """Set ``assignments`` (``?`` parameters, ``values``) on one call of a pending
        batch (only while the call is pending, with ``pending_only``).

        Raises:
            UsageError: unknown batch or call, or the batch is no longer pending (so
                ``action`` is refused).
        """
        only = " AND state = 'pending'" if pending_only else ""
        with self._write() as conn:
            self._pending_batch(conn, batch_id, action)
            updated = conn.execute(
                self._sql(
                    f"UPDATE tool_calls SET {assignments} WHERE batch_id = ? AND event_id = ?{only}"
                ),
                (*values, batch_id, event_id),
            )
            if updated.rowcount == 0:
                which = "pending call" if pending_only else "call"
                raise UsageError(f"tool batch {batch_id!r} has no {which} {event_id!r}")

    def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        """Append ``messages`` to the visible transcript and mark the batch committed.

        Raises:
            UsageError: unknown batch, or the batch is no longer pending.
        """
        rows = [message_fields(message) for message in messages]
        with self._write() as conn:
            session_id, turn_index = self._pending_batch(conn, batch_id, "commit")
            self._rows().insert_messages(conn, session_id, turn_index, rows)
            conn.execute(
                self._sql(
                    "UPDATE tool_batches SET state = 'committed', finished_at = ? WHERE id = ?"
                ),
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
            self.fence(conn, self._batch_session(conn, batch_id))
            if self._batch_state(conn, batch_id) == "pending":
                self._abandon(conn, [batch_id], state, now_iso())

    def list_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's tool journal, oldest batch first, each with its calls."""
        return self._select_batches(session_id, "")

    def list_unreported_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Batches whose effects the model has not been told about, oldest first.

        Abandoned batches, and committed batches of a turn that never finished (its
        runtime died: the turn is still ``running``, or closed with the reason
        ``interrupted``), not yet ``mark_reported``; rows as in ``list_batches``.
        """
        return self._select_batches(session_id, _UNREPORTED)

    def mark_reported(self, batch_ids: list[str], turn_index: int) -> None:
        """Record that the model was told about these batches in ``turn_index``.

        One transaction; each batch's session is fenced first.

        Raises:
            UsageError: unknown batch (nothing is marked).
        """
        with self._write() as conn:
            for batch_id in batch_ids:
                self.fence(conn, self._batch_session(conn, batch_id))
                conn.execute(
                    self._sql(
                        "UPDATE tool_batches SET reported_turn = ?"
                        " WHERE id = ? AND reported_turn IS NULL"
                    ),
                    (turn_index, batch_id),
                )

    def _select_batches(self, session_id: str, condition: str) -> list[dict[str, Any]]:
        with self._read() as conn:
            self._rows().require_session(conn, session_id)
            batches = conn.execute(
                self._sql(
                    f"SELECT {BATCH_COLUMNS} FROM tool_batches AS b"
                    f" WHERE b.session_id = ?{condition} ORDER BY b.seq"
                ),
                (session_id,),
            ).fetchall()
            calls = self._sql(
                f"SELECT {CALL_COLUMNS} FROM tool_calls WHERE batch_id = ? ORDER BY position"
            )
            return [batch_dict(row, conn.execute(calls, (row[0],)).fetchall()) for row in batches]

    def _pending_batch(self, conn: Any, batch_id: str, action: str) -> tuple[str, int]:
        session_id = self._batch_session(conn, batch_id)
        self.fence(conn, session_id)  # (PostgreSQL) takes the session lock before the read
        row = conn.execute(
            self._sql("SELECT turn_index, state FROM tool_batches WHERE id = ?"), (batch_id,)
        ).fetchone()
        assert row is not None  # batches go only with their session, under its lock
        check_pending(batch_id, action, row[1])
        return session_id, int(row[0])

    def _batch_session(self, conn: Any, batch_id: str) -> str:
        row = conn.execute(
            self._sql("SELECT session_id FROM tool_batches WHERE id = ?"), (batch_id,)
        ).fetchone()
        if row is None:
            raise unknown_batch(batch_id)
        return str(row[0])

    def _batch_state(self, conn: Any, batch_id: str) -> str:
        row = conn.execute(
            self._sql("SELECT state FROM tool_batches WHERE id = ?"), (batch_id,)
        ).fetchone()
        return "" if row is None else str(row[0])
