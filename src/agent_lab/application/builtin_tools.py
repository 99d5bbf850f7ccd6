"""The built-in tools: their argument resolvers and handlers, bound to backend ports.

Five tools ship with Agent Lab (DESIGN.md §6)::

    handoff_note              FOLLOW_UP       records a note for a human colleague
    knowledge.web.search      FOLLOW_UP       searches the configured backend
    calendar.schedule.create  TEMPLATE        books a calendar entry
    device.volume.adjust      SILENT_SUCCESS  changes the speaker volume
    session.terminate         TERMINATE       ends the conversation

Handlers are synchronous (the registry runs them in a worker thread) and talk to their
storage only through the ports of ``agent_lab.application.builtin_backends``, so this
module does no I/O of its own beyond reading the system's time-zone data. Without
explicit backends the tools use the registered defaults
(``builtin_backends.default_backends``): the composition root ``agent_lab.defaults``
registers the local SQLite and search adapters.

Definitions are immutable and shared: the same backends object always yields the same
definitions, so their schemas are checked once, not once per registry.

A handler that refuses its input, or whose backend fails, raises ``BuiltinToolError``
(a ``ValueError``); the registry reports it as ``tool handler failed: <message>``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_lab.application._tool_schemas import object_schema, text, whole_number
from agent_lab.application.builtin_backends import (
    DEFAULT_DURATION_MINUTES,
    BuiltinBackends,
    BuiltinToolError,
    Calendar,
    CalendarEntry,
    NoteBook,
    SearchBackend,
    default_backends,
)
from agent_lab.application.builtin_volume import (
    VOLUME_ADJUST,
    VOLUME_STEP,
    VolumeMode,
    next_volume,
    parse_volume_request,
    volume_tool,
)
from agent_lab.application.events import ResultPolicy
from agent_lab.application.request_text import note_text, search_query
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolPayload
from agent_lab.domain.events import ToolCallEvent

__all__ = [
    "CALENDAR_CREATE",
    "DEFAULT_MAX_RESULTS",
    "HANDOFF_NOTE",
    "SESSION_TERMINATE",
    "VOLUME_ADJUST",
    "VOLUME_STEP",
    "WEB_SEARCH",
    "VolumeMode",
    "builtin_tool_definitions",
    "next_volume",
    "parse_start",
    "parse_volume_request",
    "parse_zone",
]

HANDOFF_NOTE = "handoff_note"
WEB_SEARCH = "knowledge.web.search"
CALENDAR_CREATE = "calendar.schedule.create"
SESSION_TERMINATE = "session.terminate"

DEFAULT_MAX_RESULTS = 5


def builtin_tool_definitions(
    backends: BuiltinBackends | None = None, *, home: Path | None = None
) -> list[ToolDefinition]:
    """The built-in tools, bound to ``backends``.

    Args:
        backends: Where the tools keep their state and what they search. By default
            the registered default backends (``agent_lab.defaults``: SQLite files
            under ``home`` and a local full-text index of the bundled corpus).
        home: The data directory of the default backends; ``None`` means
            ``AGENT_LAB_HOME`` when set, else the platform's user data directory
            (``~/.local/share/agent-lab`` on Linux). Ignored when ``backends`` is given.

    Returns:
        The definitions in catalog order: handoff, search, calendar, volume, terminate.
        The same ``backends`` object always yields the same (immutable) definitions.
    """
    chosen = backends if backends is not None else default_backends(home)
    try:
        return list(_shared_definitions(chosen))
    except TypeError:  # backends that cannot be hashed are not shared
        return list(_definitions(chosen))


@functools.lru_cache(maxsize=64)
def _shared_definitions(backends: BuiltinBackends) -> tuple[ToolDefinition, ...]:
    return _definitions(backends)


def _definitions(backends: BuiltinBackends) -> tuple[ToolDefinition, ...]:
    return (
        _handoff_note_tool(backends.notes),
        _web_search_tool(backends.search),
        _calendar_tool(backends.calendar),
        volume_tool(backends.device),
        _terminate_tool(),
    )


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
        parameters=object_schema(
            {"message": text("What the colleague needs to know.")}, required=["message"]
        ),
        handler=handle,
        argument_resolver=_resolve_handoff_note,
        result_policy=ResultPolicy.FOLLOW_UP,
    )


def _resolve_handoff_note(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    return _from_request(context, "message", note_text)


def _from_request(
    context: ToolExecutionContext, argument: str, read: Callable[[str], str]
) -> dict[str, Any]:
    """``argument`` read from the user's latest request; nothing when there is none."""
    message = context.latest_text("user")
    return {argument: read(message)} if message else {}


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
        parameters=object_schema(
            {
                "query": text("What to search."),
                "max_results": whole_number(
                    1, 10, f"How many results to return (default {DEFAULT_MAX_RESULTS})."
                ),
            },
            required=["query"],
        ),
        handler=handle,
        argument_resolver=_resolve_web_search,
        result_policy=ResultPolicy.FOLLOW_UP,
    )


def _resolve_web_search(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    return _from_request(context, "query", search_query)


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
        parameters=object_schema(
            {
                "title": text("What it is."),
                "start_at": text(
                    "ISO-8601 date-time, e.g. 2026-07-14T09:30:00; "
                    "without an offset it is read in the given time zone."
                ),
                "timezone": text("IANA time zone name, e.g. Europe/Berlin."),
                "duration_minutes": whole_number(
                    1, 1440, f"Length in minutes (default {DEFAULT_DURATION_MINUTES})."
                ),
            },
            required=["title", "start_at", "timezone"],
        ),
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


# --- session.terminate --------------------------------------------------------------


def _terminate_tool() -> ToolDefinition:
    def handle(event: ToolCallEvent) -> ToolPayload:
        return {"tool": SESSION_TERMINATE, "status": "terminated"}

    return ToolDefinition(
        name=SESSION_TERMINATE,
        description="End the conversation and close the session, e.g. after a goodbye.",
        parameters=object_schema({"reason": text("Why the session ends.", blank_allowed=True)}),
        handler=handle,
        result_policy=ResultPolicy.TERMINATE,
        farewell="Goodbye.",
        coalesce=True,
    )
