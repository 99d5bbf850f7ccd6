"""The ``TranscriptStore`` role of the PostgreSQL store: sessions, turns, messages.

Most of it is ``store_common.transcript``; here are ensuring (an upsert) and deleting
(under the claim fence) a session and starting a turn, whose statements differ.
"""

from __future__ import annotations

from typing import Any

from agent_lab.domain.errors import SessionNotFound, UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.postgres.connection import Conn
from agent_lab.infrastructure.postgres.journal import SqlCore, uncommitted_messages
from agent_lab.infrastructure.postgres.rows import (
    insert_messages,
    insert_session,
    select_session,
    touch,
    turn_exists,
)
from agent_lab.infrastructure.sqlite.records import checked_id, dumps, now_iso
from agent_lab.infrastructure.sqlite.rows import message_fields
from agent_lab.infrastructure.store_common.transcript import SharedTranscript


class TranscriptRole(SqlCore, SharedTranscript):
    """Sessions, turns and the visible transcript: what this store does its own way."""

    def _uncommitted_messages(self, conn: Conn, session_id: str) -> list[dict[str, Any]]:
        return uncommitted_messages(conn, session_id)

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._write() as conn:
            insert_session(conn, session_id, title, config_json, if_missing=True)
            session = select_session(conn, session_id)
        assert session is not None
        return session

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything recorded for it.

        Raises:
            SessionNotFound: no session has that id.
        """
        with self._write() as conn:
            if not self.fence(conn, session_id):
                raise SessionNotFound(session_id)
            conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
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
        """Record a running turn, and append ``messages`` in the same transaction.

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
                " VALUES (%s, %s, 'running', %s, %s)",
                (session_id, turn_index, user_message, now),
            )
            if rows:
                insert_messages(conn, session_id, turn_index, rows)
            touch(conn, session_id, now)
