"""The ``TranscriptStore`` methods both stores run the same way.

Only ensuring a session differs per store (PostgreSQL upserts, SQLite checks first
under its write lock) and stays in each store's ``transcript``.
"""

from __future__ import annotations

import time
from typing import Any

from agent_lab.domain.errors import SessionBusy, SessionNotFound, UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.records import checked_id, dumps, new_id, now_iso
from agent_lab.infrastructure.sqlite.rows import (
    MESSAGE_COLUMNS,
    SESSION_SELECT,
    message_dict,
    message_fields,
    session_dict,
)
from agent_lab.infrastructure.store_common.batches import BatchStatements
from agent_lab.infrastructure.store_common.claims import refusal, select_claim


class SharedTranscript(BatchStatements):
    """Sessions, turns and the visible transcript, over a store's hooks."""

    def create_session(
        self, title: str, config: dict[str, Any], session_id: str | None = None
    ) -> str:
        """Create a session and return its id (a fresh uuid4 hex when not given).

        Raises:
            UsageError: a session with ``session_id`` already exists.
        """
        session_id = new_id() if session_id is None else checked_id(session_id)
        config_json = dumps(config, "session config")
        rows = self._rows()
        with self._write() as conn:
            if rows.session_exists(conn, session_id):
                raise UsageError(f"session {session_id!r} already exists")
            rows.insert_session(conn, session_id, title, config_json)
        return session_id

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Return the session summary dict, or ``None`` when there is no such session."""
        with self._read() as conn:
            return self._rows().select_session(conn, session_id)

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything recorded for it, unless a live runtime
        drives it: the claim is checked in the transaction that deletes, under the
        lock claimants take, so no claim can come in between. A claim whose lease ran
        out, or whose process is known to be dead, does not keep the session.

        Raises:
            SessionBusy: a live runtime holds the session's claim (this store's own
                claim too); nothing is deleted.
            SessionNotFound: no session has that id.
        """
        with self._write() as conn:
            self.fence(conn, session_id)  # (PostgreSQL) takes the session's row lock
            holder = refusal(select_claim(conn, self._sql, session_id), time.time())
            if holder is not None:
                raise SessionBusy(session_id, holder)
            deleted = conn.execute(self._sql("DELETE FROM sessions WHERE id = ?"), (session_id,))
            if deleted.rowcount == 0:
                raise SessionNotFound(session_id)
        self._after_commit(lambda: self._forget_session(session_id))

    def _forget_session(self, session_id: str) -> None:
        self._tokens.pop(session_id, None)
        self._known_blobs.pop(session_id, None)

    def list_sessions(self) -> list[dict[str, Any]]:
        """Return every session summary, newest first."""
        with self._read() as conn:
            rows = conn.execute(f"{SESSION_SELECT} ORDER BY seq DESC").fetchall()
        return [session_dict(row) for row in rows]

    def next_turn_index(self, session_id: str) -> int:
        """Return one more than the highest recorded turn index (1 for a new session)."""
        with self._read() as conn:
            self._rows().require_session(conn, session_id)
            row = conn.execute(
                self._sql("SELECT coalesce(max(turn_index), 0) FROM turns WHERE session_id = ?"),
                (session_id,),
            ).fetchone()
        return (int(row[0]) if row is not None else 0) + 1

    def start_turn(
        self,
        session_id: str,
        turn_index: int,
        user_message: str,
        *,
        messages: list[ChatMessage] | None = None,
    ) -> None:
        """Record a running turn, and append ``messages`` (e.g. the user's) in the same
        transaction.

        Raises:
            UsageError: the turn already exists.
        """
        rows = [message_fields(message) for message in messages or []]
        store_rows = self._rows()
        with self._write() as conn:
            now = self._stamp_turn(
                conn,
                session_id,
                "INSERT INTO turns (started_at, session_id, turn_index, status, user_message)"
                " VALUES (?, ?, ?, 'running', ?) ON CONFLICT DO NOTHING",
                (session_id, turn_index, user_message),
                refusal=f"turn {turn_index} of session {session_id!r} already exists",
            )
            if rows:
                store_rows.insert_messages(conn, session_id, turn_index, rows)  # touches it
            else:
                store_rows.touch(conn, session_id, now)

    def complete_turn(
        self,
        session_id: str,
        turn_index: int,
        *,
        status: str = "completed",
        wall_time_ms: int | None = None,
        round_count: int | None = None,
        failure_reason: str | None = None,
        failure_message: str | None = None,
    ) -> None:
        """Set a turn's final status, wall time, round count and (when it failed) why.

        Args:
            failure_reason: The machine-readable reason of a failed turn (the
                ``failure_reason`` of its ``error`` output).
            failure_message: The readable message that went with it.

        Raises:
            UsageError: the turn was never started.
        """
        with self._write() as conn:
            now = self._stamp_turn(
                conn,
                session_id,
                "UPDATE turns SET completed_at = ?, status = ?, wall_time_ms = ?,"
                " round_count = ?, failure_reason = ?, failure_message = ?"
                " WHERE session_id = ? AND turn_index = ?",
                (status, wall_time_ms, round_count, failure_reason, failure_message)
                + (session_id, turn_index),
                refusal=f"turn {turn_index} of session {session_id!r} was never started",
            )
            self._rows().touch(conn, session_id, now)

    def _stamp_turn(
        self, conn: Any, session_id: str, statement: str, params: tuple[Any, ...], *, refusal: str
    ) -> str:
        """Run one ``turns`` write whose first parameter is the time, now; return that time.

        Raises:
            UsageError: ``refusal``, when the statement changed no row.
        """
        self.writable(conn, session_id)
        now = now_iso()
        if conn.execute(self._sql(statement), (now, *params)).rowcount == 0:
            raise UsageError(refusal)
        return now

    def list_turns(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's turns in order: ``turn_index``, ``status``,
        ``wall_time_ms``, ``round_count``, ``user_message``, ``failure_reason``,
        ``failure_message``, ``started_at`` and ``completed_at``."""
        with self._read() as conn:
            self._rows().require_session(conn, session_id)
            return self._rows().select_turns(conn, session_id)

    def append_message(self, session_id: str, turn_index: int, message: ChatMessage) -> int:
        """Append one message to the visible transcript; return its ``seq``."""
        return self.append_messages(session_id, turn_index, [message])[0]

    def append_messages(
        self, session_id: str, turn_index: int, messages: list[ChatMessage]
    ) -> list[int]:
        """Append messages in one transaction; return their ``seq`` numbers."""
        rows = [message_fields(message) for message in messages]
        with self._write() as conn:
            self.writable(conn, session_id)
            return self._rows().insert_messages(conn, session_id, turn_index, rows)

    def list_messages(self, session_id: str, include_pending: bool = False) -> list[dict[str, Any]]:
        """Return the visible transcript in order.

        Args:
            session_id: The session.
            include_pending: Also render the tool journal's uncommitted batches (their
                assistant message, then each landed result) after the committed
                messages. Every message then has a ``state`` key: ``committed`` or
                the batch's ``pending`` / ``cancelled`` / ``failed``.
        """
        with self._read() as conn:
            self._rows().require_session(conn, session_id)
            rows = conn.execute(
                self._sql(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq"
                ),
                (session_id,),
            ).fetchall()
            messages = [message_dict(row) for row in rows]
            if not include_pending:
                return messages
            for message in messages:
                message["state"] = "committed"
            return messages + self._uncommitted_messages(conn, session_id)
