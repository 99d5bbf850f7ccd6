"""SQLite adapters for the built-in tools' state: notes, calendar and device settings.

All three live in one file (``builtin-tools.sqlite3`` in the data directory), each in
its own table; writes are durable before the adapter method returns.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_lab.application.builtin_backends import (
    DEFAULT_VOLUME,
    CalendarEntry,
    Note,
    VolumeChange,
)
from agent_lab.infrastructure.tool_backends.sqlite_file import ToolDatabase

_SCHEMA = """
CREATE TABLE IF NOT EXISTS handoff_notes (
    note_id TEXT PRIMARY KEY,
    message TEXT NOT NULL,
    session_id TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS calendar_entries (
    entry_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    start_at TEXT NOT NULL,
    timezone TEXT NOT NULL,
    start_utc TEXT NOT NULL,
    duration_minutes INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS device_settings (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


def _now() -> datetime:
    return datetime.now(UTC)


class SQLiteNoteBook:
    """Handoff notes in the ``handoff_notes`` table of an SQLite file."""

    def __init__(self, path: Path) -> None:
        """Use the SQLite file at ``path``, created with its parents on first use."""
        self._db = ToolDatabase(path, _SCHEMA)

    def add_note(self, message: str, *, session_id: str | None = None) -> Note:
        """Record a note; durable when this returns."""
        note = Note(
            note_id=f"note_{uuid.uuid4().hex}",
            message=message,
            session_id=session_id,
            created_at=_now(),
        )
        with self._db.transaction() as connection:
            connection.execute(
                "INSERT INTO handoff_notes (note_id, message, session_id, created_at) "
                "VALUES (?, ?, ?, ?)",
                (note.note_id, note.message, note.session_id, note.created_at.isoformat()),
            )
        return note

    def list_notes(self) -> list[Note]:
        """All notes, oldest first."""
        with self._db.reader() as connection:
            rows = connection.execute(
                "SELECT note_id, message, session_id, created_at FROM handoff_notes ORDER BY rowid"
            ).fetchall()
        return [
            Note(note_id=row[0], message=row[1], session_id=row[2], created_at=_parse(row[3]))
            for row in rows
        ]


class SQLiteCalendar:
    """Calendar entries in the ``calendar_entries`` table of an SQLite file."""

    def __init__(self, path: Path) -> None:
        """Use the SQLite file at ``path``, created with its parents on first use."""
        self._db = ToolDatabase(path, _SCHEMA)

    def add_entry(self, entry: CalendarEntry) -> CalendarEntry:
        """Store an entry under a new id; durable when this returns."""
        stored = CalendarEntry(
            title=entry.title,
            start=entry.start,
            timezone=entry.timezone,
            duration_minutes=entry.duration_minutes,
            entry_id=f"cal_{uuid.uuid4().hex}",
        )
        with self._db.transaction() as connection:
            connection.execute(
                "INSERT INTO calendar_entries (entry_id, title, start_at, timezone, "
                "start_utc, duration_minutes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.entry_id,
                    stored.title,
                    stored.start.isoformat(),
                    stored.timezone,
                    stored.start_utc.isoformat(),
                    stored.duration_minutes,
                    _now().isoformat(),
                ),
            )
        return stored

    def list_entries(self) -> list[CalendarEntry]:
        """All entries, earliest start first."""
        with self._db.reader() as connection:
            rows = connection.execute(
                "SELECT entry_id, title, start_at, timezone, duration_minutes "
                "FROM calendar_entries ORDER BY start_utc, rowid"
            ).fetchall()
        return [_entry_from_row(row) for row in rows]


class SQLiteDeviceState:
    """Device settings (the volume) in the ``device_settings`` table of an SQLite file."""

    def __init__(self, path: Path) -> None:
        """Use the SQLite file at ``path``, created with its parents on first use."""
        self._db = ToolDatabase(path, _SCHEMA)

    def volume(self) -> int:
        """The current volume; ``DEFAULT_VOLUME`` before anything was stored."""
        with self._db.reader() as connection:
            return _read_volume(connection)

    def update_volume(self, change: Callable[[int], int]) -> VolumeChange:
        """Replace the volume ``v`` by ``change(v)`` in one write transaction.

        Raises:
            ValueError: ``change`` returned a level outside 0–100 (nothing is stored).
        """
        with self._db.transaction() as connection:
            previous = _read_volume(connection)
            volume = change(previous)
            if not 0 <= volume <= 100:
                raise ValueError(f"volume must be between 0 and 100, got {volume}")
            connection.execute(
                "INSERT INTO device_settings (name, value) VALUES ('volume', ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (volume,),
            )
        return VolumeChange(previous=previous, volume=volume)


def _read_volume(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT value FROM device_settings WHERE name = 'volume'").fetchone()
    return DEFAULT_VOLUME if row is None else int(row[0])


def _entry_from_row(row: tuple[str, str, str, str, int]) -> CalendarEntry:
    entry_id, title, start_at, timezone, duration = row
    start = _parse(start_at)
    # If the zone vanished from this machine, the stored offset still names the instant.
    with suppress(ZoneInfoNotFoundError, ValueError, OSError):
        start = start.astimezone(ZoneInfo(timezone))
    return CalendarEntry(
        title=title,
        start=start,
        timezone=timezone,
        duration_minutes=int(duration),
        entry_id=entry_id,
    )


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)
