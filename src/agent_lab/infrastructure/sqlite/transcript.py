"""The ``TranscriptStore`` role of the SQLite store: sessions, turns, messages.

Most of it is ``store_common.transcript``; here are ensuring and deleting a session and
starting a turn, whose statements are SQLite's own.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_lab.domain.errors import SessionNotFound, UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.journal import SqlCore, uncommitted_messages
from agent_lab.infrastructure.sqlite.records import checked_id, dumps, now_iso
from agent_lab.infrastructure.sqlite.rows import (
    insert_messages,
    insert_session,
    message_fields,
    select_session,
    session_exists,
    touch,
    turn_exists,
)
from agent_lab.infrastructure.store_common.transcript import SharedTranscript


class TranscriptRole(SqlCore, SharedTranscript):
    """Sessions, turns and the visible transcript: what this store does its own way."""

    def _uncommitted_messages(
        self, conn: sqlite3.Connection, session_id: str
    ) -> list[dict[str, Any]]:
        return uncommitted_messages(conn, session_id)

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._write() as conn:
            if not session_exists(conn, session_id):
                insert_session(conn, session_id, title, config_json)
            session = select_session(conn, session_id)
        assert session is not None
        return session

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything recorded for it.

        Raises:
            SessionNotFound: no session has that id.
        """
        with self._write() as conn:
            self.fence(conn, session_id)
            deleted = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            if deleted.rowcount == 0:
                raise SessionNotFound(session_id)
        self._after_commit(lambda: self._forget_session(session_id))

    def _forget_session(self, session_id: str) -> None:
        self._tokens.pop(session_id, None)
        self._known_blobs.pop(session_id, None)

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
        with self._write() as conn:
            self.writable(conn, session_id)
            if turn_exists(conn, session_id, turn_index):
                raise UsageError(f"turn {turn_index} of session {session_id!r} already exists")
            now = now_iso()
            conn.execute(
                "INSERT INTO turns (session_id, turn_index, status, user_message, started_at)"
                " VALUES (?, ?, 'running', ?, ?)",
                (session_id, turn_index, user_message, now),
            )
            if rows:
                insert_messages(conn, session_id, turn_index, rows)  # touches the session
            else:
                touch(conn, session_id, now)
