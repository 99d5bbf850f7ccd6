"""The ``TranscriptStore`` role of the SQLite store: sessions, turns, messages.

All of it is ``store_common.transcript`` but ensuring a session, which checks for it
first under the store's write lock.
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.sqlite.journal import SqlCore
from agent_lab.infrastructure.sqlite.records import checked_id, dumps
from agent_lab.infrastructure.sqlite.rows import insert_session, select_session, session_exists
from agent_lab.infrastructure.store_common.transcript import SharedTranscript


class TranscriptRole(SqlCore, SharedTranscript):
    """Sessions, turns and the visible transcript: what this store does its own way."""

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
