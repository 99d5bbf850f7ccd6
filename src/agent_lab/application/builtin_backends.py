"""The ports the built-in tools talk to.

The built-in tools (``agent_lab.application.builtin_tools``) keep notes, calendar
entries and the device volume, and search documents, only through the protocols below.
Adapters live in ``agent_lab.infrastructure.tool_backends``; this layer never imports
them (see ``agent_lab.application.builtin_defaults`` for how the defaults plug in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from agent_lab.application.builtin_defaults import (
    BackendsFactory,
    default_backends,
    register_default_backends,
)
from agent_lab.domain.errors import ToolFailed

DEFAULT_DURATION_MINUTES = 30
DEFAULT_VOLUME = 50
"""The volume a device starts at before anything was stored."""

SearchBackendName = Literal["local", "http"]

__all__ = [
    "DEFAULT_DURATION_MINUTES",
    "DEFAULT_VOLUME",
    "BackendsFactory",
    "BuiltinBackends",
    "BuiltinToolError",
    "Calendar",
    "CalendarEntry",
    "DeviceState",
    "Note",
    "NoteBook",
    "SearchBackend",
    "SearchBackendName",
    "SearchHit",
    "VolumeChange",
    "default_backends",
    "register_default_backends",
]


class BuiltinToolError(ToolFailed, ValueError):
    """A built-in tool refused its input, or its backend failed.

    It is a ``ValueError`` too, so callers that only know the standard library can
    catch it; the registry turns it into ``tool handler failed: <message>``.
    """


@dataclass(frozen=True)
class Note:
    """A handoff note as stored."""

    note_id: str
    message: str
    session_id: str | None
    created_at: datetime
    """When it was recorded, in UTC."""


@dataclass(frozen=True)
class CalendarEntry:
    """One calendar booking; ``entry_id`` is empty until the calendar stored it."""

    title: str
    start: datetime
    """Aware, expressed in ``timezone``."""
    timezone: str
    """The IANA zone name the entry was booked in."""
    duration_minutes: int = DEFAULT_DURATION_MINUTES
    entry_id: str = ""

    @property
    def start_utc(self) -> datetime:
        """The start as a UTC instant."""
        return self.start.astimezone(UTC)


@dataclass(frozen=True)
class VolumeChange:
    """The volume before and after one adjustment (both 0–100)."""

    previous: int
    volume: int


@dataclass(frozen=True)
class SearchHit:
    """One search result, best first in a result list."""

    title: str
    snippet: str
    source: str
    """Where it came from: a corpus-relative path or a URL."""
    score: float
    """Higher is better; only comparable within one result list."""

    def as_payload(self) -> dict[str, Any]:
        """The hit as it appears in the tool's ``results`` list."""
        return asdict(self)


class NoteBook(Protocol):
    """Durable store of handoff notes."""

    def add_note(self, message: str, *, session_id: str | None = None) -> Note:
        """Record a note; it is durable when this returns."""
        ...

    def list_notes(self) -> list[Note]:
        """All notes, oldest first."""
        ...


class Calendar(Protocol):
    """Durable calendar."""

    def add_entry(self, entry: CalendarEntry) -> CalendarEntry:
        """Store an entry; returns it with its ``entry_id``, durable when this returns."""
        ...

    def list_entries(self) -> list[CalendarEntry]:
        """All entries, earliest start first."""
        ...


class DeviceState(Protocol):
    """Durable device settings."""

    def volume(self) -> int:
        """The current volume (0–100)."""
        ...

    def update_volume(self, change: Callable[[int], int]) -> VolumeChange:
        """Atomically replace the volume ``v`` by ``change(v)``; durable when this returns."""
        ...


class SearchBackend(Protocol):
    """A search engine the ``knowledge.web.search`` tool queries."""

    @property
    def name(self) -> SearchBackendName:
        """``"local"`` or ``"http"``; reported in the tool's payload."""
        ...

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """At most ``limit`` hits, best first; ``[]`` when nothing matches.

        Raises:
            BuiltinToolError: the backend failed (unreachable, bad answer, ...).
        """
        ...


@dataclass(frozen=True)
class BuiltinBackends:
    """The storage and search backends the built-in tools run against."""

    notes: NoteBook
    calendar: Calendar
    device: DeviceState
    search: SearchBackend
