"""The built-in tools: their backend ports, argument resolvers and handlers.

Five tools ship with Agent Lab (DESIGN.md §6)::

    handoff_note              FOLLOW_UP       records a note for a human colleague
    knowledge.web.search      FOLLOW_UP       searches the configured backend
    calendar.schedule.create  TEMPLATE        books a calendar entry
    device.volume.adjust      SILENT_SUCCESS  changes the speaker volume
    session.terminate         TERMINATE       ends the conversation

Handlers are synchronous (the registry runs them in a worker thread) and talk to their
storage only through the ports below, so this module does no I/O of its own beyond
reading the system's time-zone data. The real adapters live in
``agent_lab.infrastructure.tool_backends.backends``; when no backends are given,
``builtin_tool_definitions`` imports the local defaults from there, lazily: that one
import is the documented composition default.

A handler that refuses its input, or whose backend fails, raises ``BuiltinToolError``
(a ``ValueError``); the registry reports it as ``tool handler failed: <message>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal, Protocol, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_lab.application.events import ResultPolicy
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolPayload
from agent_lab.domain.errors import ToolFailed
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, Role

HANDOFF_NOTE = "handoff_note"
WEB_SEARCH = "knowledge.web.search"
CALENDAR_CREATE = "calendar.schedule.create"
VOLUME_ADJUST = "device.volume.adjust"
SESSION_TERMINATE = "session.terminate"

DEFAULT_MAX_RESULTS = 5
DEFAULT_DURATION_MINUTES = 30
DEFAULT_VOLUME = 50
"""The volume a device starts at before anything was stored."""
VOLUME_STEP = 10
"""What "louder" or "quieter" without a number changes the volume by."""

VolumeMode = Literal["absolute", "relative"]
SearchBackendName = Literal["local", "http"]


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
        return {
            "title": self.title,
            "snippet": self.snippet,
            "source": self.source,
            "score": self.score,
        }


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


def builtin_tool_definitions(backends: BuiltinBackends | None = None) -> list[ToolDefinition]:
    """The built-in tools, bound to ``backends``.

    Args:
        backends: Where the tools keep their state and what they search. By default
            ``agent_lab.infrastructure.tool_backends.backends.local_backends()``: SQLite files
            under ``AGENT_LAB_HOME`` and a local full-text index of the bundled corpus.

    Returns:
        The definitions in catalog order: handoff, search, calendar, volume, terminate.
    """
    if backends is None:
        from agent_lab.infrastructure.tool_backends.backends import local_backends

        backends = local_backends()
    return [
        _handoff_note_tool(backends.notes),
        _web_search_tool(backends.search),
        _calendar_tool(backends.calendar),
        _volume_tool(backends.device),
        _terminate_tool(),
    ]


# --- handoff_note -------------------------------------------------------------------


def _handoff_note_tool(notes: NoteBook) -> ToolDefinition:
    def handle(event: ToolCallEvent, context: ToolExecutionContext) -> ToolPayload:
        message = str(event.arguments["message"])
        if not message.strip():
            raise BuiltinToolError("the note is blank")
        notes.add_note(message, session_id=context.session_id)
        return {"tool": HANDOFF_NOTE, "message": message}

    return ToolDefinition(
        name=HANDOFF_NOTE,
        description="Hand the conversation over to a human colleague with a short note.",
        parameters={
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "description": "What the colleague needs to know.",
                }
            },
            "required": ["message"],
        },
        handler=handle,
        argument_resolver=_resolve_handoff_note,
        result_policy=ResultPolicy.FOLLOW_UP,
    )


def _resolve_handoff_note(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    message = _latest_text(context.history, "assistant") or _latest_text(context.history, "user")
    return {"message": message} if message else {}


# --- knowledge.web.search -----------------------------------------------------------


def _web_search_tool(backend: SearchBackend) -> ToolDefinition:
    def handle(event: ToolCallEvent) -> ToolPayload:
        query = str(event.arguments["query"]).strip()
        if not query:
            raise BuiltinToolError("the search query is blank")
        limit = int(event.arguments.get("max_results", DEFAULT_MAX_RESULTS))
        hits = backend.search(query, limit=limit)[:limit]
        return {
            "tool": WEB_SEARCH,
            "query": query,
            "backend": backend.name,
            "results": [hit.as_payload() for hit in hits],
            "sources": list(dict.fromkeys(hit.source for hit in hits)),
        }

    return ToolDefinition(
        name=WEB_SEARCH,
        description="Look up documents that can ground an answer, with their sources.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to search."},
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": f"How many results to return (default {DEFAULT_MAX_RESULTS}).",
                },
            },
            "required": ["query"],
        },
        handler=handle,
        argument_resolver=_resolve_web_search,
        result_policy=ResultPolicy.FOLLOW_UP,
    )


def _resolve_web_search(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    query = _latest_text(context.history, "user")
    return {"query": query.strip()} if query else {}


# --- calendar.schedule.create -------------------------------------------------------


def _calendar_tool(calendar: Calendar) -> ToolDefinition:
    def handle(event: ToolCallEvent) -> ToolPayload:
        entry = calendar.add_entry(_calendar_entry(event.arguments))
        return {
            "tool": CALENDAR_CREATE,
            "status": "scheduled",
            "entry_id": entry.entry_id,
            "title": entry.title,
            "start_at": entry.start.isoformat(),
            "timezone": entry.timezone,
            "start_utc": entry.start_utc.isoformat(),
            "duration_minutes": entry.duration_minutes,
        }

    return ToolDefinition(
        name=CALENDAR_CREATE,
        description="Add an entry to the user's calendar at a given date, time and zone.",
        parameters={
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "description": "What it is."},
                "start_at": {
                    "type": "string",
                    "minLength": 1,
                    "description": "ISO-8601 date-time, e.g. 2026-07-14T09:30:00; "
                    "without an offset it is read in the given time zone.",
                },
                "timezone": {
                    "type": "string",
                    "minLength": 1,
                    "description": "IANA time zone name, e.g. Europe/Berlin.",
                },
                "duration_minutes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1440,
                    "description": f"Length in minutes (default {DEFAULT_DURATION_MINUTES}).",
                },
            },
            "required": ["title", "start_at", "timezone"],
        },
        handler=handle,
        result_policy=ResultPolicy.TEMPLATE,
        confirmation_template="Scheduled {title} for {start_at} ({timezone}).",
    )


def _calendar_entry(arguments: dict[str, Any]) -> CalendarEntry:
    title = str(arguments["title"]).strip()
    if not title:
        raise BuiltinToolError("the title is blank")
    zone_name = str(arguments["timezone"]).strip()
    zone = parse_zone(zone_name)
    return CalendarEntry(
        title=title,
        start=parse_start(str(arguments["start_at"]), zone),
        timezone=zone_name,
        duration_minutes=int(arguments.get("duration_minutes", DEFAULT_DURATION_MINUTES)),
    )


def parse_zone(name: str) -> ZoneInfo:
    """The IANA zone called ``name``.

    Raises:
        BuiltinToolError: no such zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise BuiltinToolError(f"unknown timezone {name!r}; use an IANA name") from None


def parse_start(text: str, zone: ZoneInfo) -> datetime:
    """An ISO-8601 date-time as an aware time in ``zone``.

    A time without an offset is read as wall-clock time in ``zone``; one with an
    offset keeps its instant and is expressed in ``zone``.

    Raises:
        BuiltinToolError: not an ISO-8601 date-time, a date without a time, or a
            wall-clock time that the zone skips (a daylight-saving gap).
    """
    text = text.strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BuiltinToolError(
            f"start_at {text!r} is not an ISO-8601 date-time such as 2026-07-14T09:30:00"
        ) from None
    if _is_date_only(text):
        raise BuiltinToolError(f"start_at {text!r} has no time of day")
    if parsed.tzinfo is not None:
        return parsed.astimezone(zone)
    local = parsed.replace(tzinfo=zone)
    if local.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != parsed:
        raise BuiltinToolError(f"{text} does not exist in {zone.key} (a daylight-saving gap)")
    return local


def _is_date_only(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


# --- device.volume.adjust -----------------------------------------------------------


def _volume_tool(device: DeviceState) -> ToolDefinition:
    def handle(event: ToolCallEvent) -> ToolPayload:
        mode: VolumeMode = event.arguments["mode"]
        value = int(event.arguments["value"])
        change = device.update_volume(lambda previous: next_volume(previous, mode, value))
        return {"tool": VOLUME_ADJUST, "previous": change.previous, "volume": change.volume}

    return ToolDefinition(
        name=VOLUME_ADJUST,
        description="Change the speaker volume: set a level, or step it up or down.",
        parameters={
            "type": "object",
            "properties": {
                "mode": {
                    "type": "string",
                    "enum": ["absolute", "relative"],
                    "description": "absolute sets the level; relative changes it.",
                },
                "value": {
                    "type": "integer",
                    "minimum": -100,
                    "maximum": 100,
                    "description": "The level (0-100) or the change (negative is quieter).",
                },
            },
            "required": ["mode", "value"],
        },
        handler=handle,
        argument_resolver=_resolve_volume,
        result_policy=ResultPolicy.SILENT_SUCCESS,
    )


def next_volume(previous: int, mode: VolumeMode, value: int) -> int:
    """The volume after one adjustment, clamped to 0–100."""
    target = value if mode == "absolute" else previous + value
    return max(0, min(100, target))


_NUMBER = r"(\d{1,3})\s*(?:%|percent\b)?"
_TARGET = r"(?:it|the\s+volume|volume|the\s+sound|the\s+music)"
_UP_OR_DOWN = r"(up|down)"
_VERB_UP = {"raise": 1, "increase": 1, "lower": -1, "decrease": -1, "reduce": -1}
_NEGATION = re.compile(r"\b(?:don'?t|do\s+not|not|never|no)\b")

_VolumeRule: TypeAlias = tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[str, int]]]

_EXPLICIT_PATTERNS: tuple[_VolumeRule, ...] = (
    (
        re.compile(rf"\b(?:volume|sound)\b[^.!?\d]*?\b(?:to|at)\s+{_NUMBER}"),
        lambda m: ("absolute", int(m[1])),
    ),
    (
        re.compile(rf"\b(?:turn|crank|bring|set)\s+{_TARGET}\s+(?:up|down)\s+to\s+{_NUMBER}"),
        lambda m: ("absolute", int(m[1])),
    ),
    (
        re.compile(rf"\b(?:turn|crank|bring)\s+{_TARGET}\s+{_UP_OR_DOWN}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", int(m[2]) if m[1] == "up" else -int(m[2])),
    ),
    (
        re.compile(rf"\bvolume\s+{_UP_OR_DOWN}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", int(m[2]) if m[1] == "up" else -int(m[2])),
    ),
    (
        re.compile(rf"\b(raise|increase|lower|decrease|reduce)\s+{_TARGET}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", _VERB_UP[m[1]] * int(m[2])),
    ),
)

_STEP_PATTERNS: tuple[_VolumeRule, ...] = (
    (re.compile(r"\blouder\b"), lambda m: ("relative", VOLUME_STEP)),
    (re.compile(r"\b(?:quieter|softer)\b"), lambda m: ("relative", -VOLUME_STEP)),
    (
        re.compile(rf"\b(?:turn|crank|bring)\s+{_TARGET}\s+{_UP_OR_DOWN}\b"),
        lambda m: ("relative", VOLUME_STEP if m[1] == "up" else -VOLUME_STEP),
    ),
    (
        re.compile(rf"\bvolume\s+{_UP_OR_DOWN}\b"),
        lambda m: ("relative", VOLUME_STEP if m[1] == "up" else -VOLUME_STEP),
    ),
    (
        re.compile(rf"\b(raise|increase|lower|decrease|reduce)\s+{_TARGET}\b"),
        lambda m: ("relative", _VERB_UP[m[1]] * VOLUME_STEP),
    ),
    (
        re.compile(r"\bmute\s+(?:it|the\s+(?:sound|volume|speaker|audio|music))\b"),
        lambda m: ("absolute", 0),
    ),
    (re.compile(r"^\W*(?:please\s+)?mute(?:\s+please)?\W*$"), lambda m: ("absolute", 0)),
)


def _resolve_volume(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    text = _latest_text(context.history, "user")
    return parse_volume_request(text) if text else {}


def parse_volume_request(text: str) -> dict[str, Any]:
    """Volume arguments stated plainly in ``text``, or ``{}`` when unsure.

    Numbers win over bare steps ("turn the volume up to 80" is absolute 80); a
    negation, conflicting requests or a number above 100 give ``{}``.

    For example::

        parse_volume_request("Set the volume to 30")  # {"mode": "absolute", "value": 30}
        parse_volume_request("a bit louder please")   # {"mode": "relative", "value": 10}
    """
    lowered = text.lower()
    if _NEGATION.search(lowered):
        return {}
    for patterns in (_EXPLICIT_PATTERNS, _STEP_PATTERNS):
        found = {build(match) for pattern, build in patterns for match in pattern.finditer(lowered)}
        if len(found) > 1:
            return {}
        if found:
            mode, value = found.pop()
            return {"mode": mode, "value": value} if -100 <= value <= 100 else {}
    return {}


# --- session.terminate --------------------------------------------------------------


def _terminate_tool() -> ToolDefinition:
    def handle(event: ToolCallEvent) -> ToolPayload:
        return {"tool": SESSION_TERMINATE, "status": "terminated"}

    return ToolDefinition(
        name=SESSION_TERMINATE,
        description="End the conversation and close the session, e.g. after a goodbye.",
        parameters={
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why the session ends."},
            },
        },
        handler=handle,
        result_policy=ResultPolicy.TERMINATE,
        farewell="Goodbye.",
        coalesce=True,
    )


# --- shared -------------------------------------------------------------------------


def _latest_text(history: Sequence[ChatMessage], role: Role) -> str | None:
    """The newest non-blank content of ``role``, skipping event-agent result messages."""
    for message in reversed(history):
        if message.role == role and message.name != "event_agent" and message.content.strip():
            return message.content
    return None
