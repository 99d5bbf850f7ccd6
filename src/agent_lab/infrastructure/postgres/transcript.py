"""The ``TranscriptStore`` role of the PostgreSQL store: sessions, turns, messages.

All of it is ``store_common.transcript`` but ensuring a session, an upsert here.
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.postgres.journal import SqlCore
from agent_lab.infrastructure.postgres.rows import insert_session, select_session
from agent_lab.infrastructure.sqlite.records import checked_id, dumps
from agent_lab.infrastructure.store_common.transcript import SharedTranscript


class TranscriptRole(SqlCore, SharedTranscript):
    """Sessions, turns and the visible transcript: what this store does its own way."""

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._write() as conn:
            insert_session(conn, session_id, title, config_json, if_missing=True)
            session = select_session(conn, session_id)
        assert session is not None
        return session
