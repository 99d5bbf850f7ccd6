"""The ``TranscriptStore`` role of the SQLite store: sessions, turns, messages.

All of it is ``store_common.transcript`` but ensuring a session, which inserts it
unless it exists, under the store's write lock, and reads back only a session that
was already there (a new one's summary is known).
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.sqlite.journal import SqlCore
from agent_lab.infrastructure.sqlite.records import checked_id, dumps, now_iso, session_title
from agent_lab.infrastructure.sqlite.rows import select_session, session_dict
from agent_lab.infrastructure.store_common.transcript import SharedTranscript


class TranscriptRole(SqlCore, SharedTranscript):
    """Sessions, turns and the visible transcript: what this store does its own way."""

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._write() as conn:
            now = now_iso()
            title = session_title(title)
            inserted = conn.execute(
                "INSERT INTO sessions (id, title, config, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (session_id, title, config_json, now, now),
            ).rowcount
            if inserted:
                self._created_now(session_id)
                return session_dict((session_id, title, config_json, now, now, 0, 0))
            session = select_session(conn, session_id)
        assert session is not None
        return session
