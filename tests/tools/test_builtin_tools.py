"""The built-in tools against their real backends: SQLite files, FTS5 and a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import platformdirs
import pytest

from agent_lab.application.builtin_backends import (
    BuiltinBackends,
    BuiltinToolError,
    CalendarEntry,
    Note,
    SearchHit,
)
from agent_lab.application.builtin_tools import builtin_tool_definitions, parse_volume_request
from agent_lab.application.events import ResultPolicy
from agent_lab.application.request_text import note_text, search_query
from agent_lab.application.tools import (
    ToolExecutionContext,
    ToolOutcome,
    ToolRegistry,
    build_default_tool_registry,
)
from agent_lab.domain.errors import ConfigError, ToolFailed
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.tool_backends.backends import (
    TOOLS_DATABASE_NAME,
    HttpSearchBackend,
    LocalSearchBackend,
    SQLiteCalendar,
    SQLiteNoteBook,
    bundled_corpus_dir,
    data_home,
    local_backends,
)

ALL_TOOLS = [
    "handoff_note",
    "knowledge.web.search",
    "calendar.schedule.create",
    "device.volume.adjust",
    "session.terminate",
]


def call(name: str, call_id: str = "call-1", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments)


def history(*messages: tuple[str, str]) -> ToolExecutionContext:
    return ToolExecutionContext(
        history=[ChatMessage(role=role, content=content) for role, content in messages]
    )


@pytest.fixture
def backends(agent_lab_home: Path) -> BuiltinBackends:
    return local_backends()


@pytest.fixture
def registry(backends: BuiltinBackends) -> ToolRegistry:
    return ToolRegistry(builtin_tool_definitions(backends))


async def run(registry: ToolRegistry, name: str, **arguments: Any) -> ToolOutcome:
    return await registry.run(call(name, **arguments), ALL_TOOLS)


def tool_rows(home: Path, sql: str) -> list[tuple[Any, ...]]:
    """Read the tools database with a separate connection: what is on disk."""
    connection = sqlite3.connect(home / TOOLS_DATABASE_NAME)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


# --- definitions --------------------------------------------------------------------


def test_default_registry_has_the_five_builtins_with_their_policies() -> None:
    registry = build_default_tool_registry()

    assert registry.names() == ALL_TOOLS
    policies = {d.name: d.result_policy for d in registry.definitions()}
    assert policies == {
        "handoff_note": ResultPolicy.FOLLOW_UP,
        "knowledge.web.search": ResultPolicy.FOLLOW_UP,
        "calendar.schedule.create": ResultPolicy.TEMPLATE,
        "device.volume.adjust": ResultPolicy.SILENT_SUCCESS,
        "session.terminate": ResultPolicy.TERMINATE,
    }
    calendar = registry.get("calendar.schedule.create")
    assert calendar is not None
    assert calendar.confirmation_template == "Scheduled {title} for {start_at} ({timezone})."
    terminate = registry.get("session.terminate")
    assert terminate is not None
    assert terminate.farewell == "Goodbye."


def test_required_parameters_match_the_design() -> None:
    registry = build_default_tool_registry()

    required = {d.name: d.parameters.get("required", []) for d in registry.definitions()}

    assert required == {
        "handoff_note": ["message"],
        "knowledge.web.search": ["query"],
        "calendar.schedule.create": ["title", "start_at", "timezone"],
        "device.volume.adjust": ["mode", "value"],
        "session.terminate": [],
    }


def test_event_catalog_of_the_builtins_names_no_parameter() -> None:
    registry = build_default_tool_registry()

    catalog = registry.chat_event_system_message(registry.names())

    assert catalog.startswith("Available events:\n")
    for name in ALL_TOOLS:
        assert f"- {name}: " in catalog
    parameter_names = {
        parameter
        for definition in registry.definitions()
        for parameter in definition.parameters.get("properties", {})
    }
    for parameter in parameter_names:
        assert parameter not in catalog


@pytest.mark.asyncio
async def test_default_backends_keep_their_files_under_agent_lab_home(
    agent_lab_home: Path,
) -> None:
    registry = build_default_tool_registry()

    outcome = await run(registry, "handoff_note", message="Call the customer back.")

    assert outcome.ok
    assert (agent_lab_home / TOOLS_DATABASE_NAME).is_file()


# --- handoff_note -------------------------------------------------------------------


@pytest.mark.asyncio
async def test_handoff_note_is_recorded_durably(
    registry: ToolRegistry, agent_lab_home: Path
) -> None:
    context = ToolExecutionContext(session_id="session-7")
    event = call("handoff_note", message="Refund approved; send the label.")

    payload = await registry.execute_async(event, ALL_TOOLS, context)

    assert payload == {"tool": "handoff_note", "message": "Refund approved; send the label."}
    assert tool_rows(agent_lab_home, "SELECT message, session_id FROM handoff_notes") == [
        ("Refund approved; send the label.", "session-7")
    ]
    notes = SQLiteNoteBook(agent_lab_home / TOOLS_DATABASE_NAME).list_notes()
    assert [(note.message, note.session_id) for note in notes] == [
        ("Refund approved; send the label.", "session-7")
    ]
    assert notes[0].note_id.startswith("note_")
    assert notes[0].created_at.tzinfo is not None


@pytest.mark.asyncio
async def test_handoff_note_rejects_a_blank_note(registry: ToolRegistry) -> None:
    outcome = await run(registry, "handoff_note", message="   ")

    assert outcome.payload == {
        "tool": "handoff_note",
        "error": "tool handler failed: the note is blank",
    }


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [("user", "Take a note that the customer wants a refund."), ("assistant", "Noted.")],
            "The customer wants a refund",
        ),
        ([("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "  ")], "u2"),
        ([("user", "only the user spoke"), ("assistant", "")], "only the user spoke"),
        ([("user", "first"), ("user", "second")], "second"),
    ],
)
async def test_handoff_note_resolves_the_users_request_not_the_assistants_acknowledgement(
    registry: ToolRegistry, messages: list[tuple[str, str]], expected: str
) -> None:
    resolved = await registry.resolve_arguments(call("handoff_note"), history(*messages))

    assert resolved == {"message": expected}
    assert registry.validation_error("handoff_note", resolved) is None


@pytest.mark.parametrize(
    ("message", "note"),
    [
        ("Take a note that the customer wants a refund.", "The customer wants a refund"),
        ("please note down: call Dana back tomorrow. Thanks!", "Call Dana back tomorrow"),
        ("Note that the VPN is down and set the volume to 20", "The VPN is down"),
        ("Set the volume to 20, then hand it off to a colleague: Dana called", "Dana called"),
        ("Hand this off to a colleague", "Hand this off to a colleague"),
        ("The printer is broken.", "The printer is broken."),
    ],
)
def test_the_note_resolver_keeps_what_the_colleague_needs_to_know(message: str, note: str) -> None:
    assert note_text(message) == note


@pytest.mark.asyncio
async def test_handoff_note_resolver_skips_event_agent_results(registry: ToolRegistry) -> None:
    context = ToolExecutionContext(
        history=[
            ChatMessage(role="user", content="real question"),
            ChatMessage(role="user", content="EventAgent results:\n{}", name="event_agent"),
        ]
    )

    resolved = await registry.resolve_arguments(call("handoff_note"), context)

    assert resolved == {"message": "real question"}


@pytest.mark.asyncio
async def test_handoff_note_resolves_nothing_from_an_empty_history(
    registry: ToolRegistry,
) -> None:
    resolved = await registry.resolve_arguments(call("handoff_note"), history(("user", " ")))

    assert resolved == {}
    assert registry.validation_error("handoff_note", resolved) is not None


# --- calendar.schedule.create -------------------------------------------------------


@pytest.mark.asyncio
async def test_calendar_entry_is_stored_and_confirmed(
    registry: ToolRegistry, agent_lab_home: Path
) -> None:
    outcome = await run(
        registry,
        "calendar.schedule.create",
        title="Design review",
        start_at="2026-07-14T09:30:00+08:00",
        timezone="Asia/Shanghai",
    )

    assert outcome.ok
    assert outcome.confirmation == (
        "Scheduled Design review for 2026-07-14T09:30:00+08:00 (Asia/Shanghai)."
    )
    payload = outcome.payload
    assert payload["entry_id"].startswith("cal_")
    assert payload == {
        "tool": "calendar.schedule.create",
        "status": "scheduled",
        "entry_id": payload["entry_id"],
        "title": "Design review",
        "start_at": "2026-07-14T09:30:00+08:00",
        "timezone": "Asia/Shanghai",
        "start_utc": "2026-07-14T01:30:00+00:00",
        "duration_minutes": 30,
    }
    on_disk = tool_rows(agent_lab_home, "SELECT entry_id, title, start_utc FROM calendar_entries")
    assert on_disk == [(payload["entry_id"], "Design review", "2026-07-14T01:30:00+00:00")]


@pytest.mark.asyncio
async def test_calendar_entries_read_back_after_reopening(
    registry: ToolRegistry, agent_lab_home: Path
) -> None:
    await run(
        registry,
        "calendar.schedule.create",
        title="Later",
        start_at="2026-09-01T10:00",
        timezone="Europe/Berlin",
        duration_minutes=90,
    )
    await run(
        registry,
        "calendar.schedule.create",
        title="Earlier",
        start_at="2026-08-01T10:00",
        timezone="America/New_York",
    )

    entries = local_backends().calendar.list_entries()

    assert [(e.title, e.timezone, e.duration_minutes) for e in entries] == [
        ("Earlier", "America/New_York", 30),
        ("Later", "Europe/Berlin", 90),
    ]
    assert entries[0].start.isoformat() == "2026-08-01T10:00:00-04:00"
    assert entries[1].start_utc.isoformat() == "2026-09-01T08:00:00+00:00"
    assert all(entry.entry_id.startswith("cal_") for entry in entries)


@pytest.mark.asyncio
async def test_calendar_reads_a_naive_time_in_the_given_zone(registry: ToolRegistry) -> None:
    outcome = await run(
        registry,
        "calendar.schedule.create",
        title="Stand-up",
        start_at="2026-07-14T09:30",
        timezone="Europe/Berlin",
    )

    assert outcome.payload["start_at"] == "2026-07-14T09:30:00+02:00"
    assert outcome.payload["start_utc"] == "2026-07-14T07:30:00+00:00"


@pytest.mark.asyncio
async def test_calendar_expresses_an_offset_time_in_the_given_zone(
    registry: ToolRegistry,
) -> None:
    outcome = await run(
        registry,
        "calendar.schedule.create",
        title="Call",
        start_at="2026-01-05T08:00:00Z",
        timezone="America/New_York",
    )

    assert outcome.payload["start_at"] == "2026-01-05T03:00:00-05:00"
    assert outcome.payload["start_utc"] == "2026-01-05T08:00:00+00:00"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"start_at": "2026-07-14T09:30", "timezone": "Mars/Olympus"},
            "unknown timezone 'Mars/Olympus'; use an IANA name",
        ),
        (
            {"start_at": "2026-07-14T09:30", "timezone": "America"},
            "unknown timezone 'America'; use an IANA name",
        ),
        (
            {"start_at": "2026-07-14T09:30", "timezone": "../../etc/passwd"},
            "unknown timezone '../../etc/passwd'; use an IANA name",
        ),
        (
            {"start_at": "next tuesday at ten", "timezone": "Europe/Berlin"},
            "start_at 'next tuesday at ten' is not an ISO-8601 date-time "
            "such as 2026-07-14T09:30:00",
        ),
        (
            {"start_at": "2026-07-14", "timezone": "Europe/Berlin"},
            "start_at '2026-07-14' has no time of day",
        ),
        (
            {"start_at": "2026-03-29T02:30:00", "timezone": "Europe/Berlin"},
            "2026-03-29T02:30:00 does not exist in Europe/Berlin (a daylight-saving gap)",
        ),
    ],
)
async def test_calendar_rejects_bad_times_and_zones_without_storing(
    registry: ToolRegistry, backends: BuiltinBackends, arguments: dict[str, Any], error: str
) -> None:
    outcome = await run(registry, "calendar.schedule.create", title="Review", **arguments)

    assert outcome.payload == {
        "tool": "calendar.schedule.create",
        "error": f"tool handler failed: {error}",
    }
    assert outcome.confirmation is None
    assert backends.calendar.list_entries() == []


@pytest.mark.asyncio
async def test_calendar_rejects_a_blank_title(registry: ToolRegistry) -> None:
    outcome = await run(
        registry,
        "calendar.schedule.create",
        title="  ",
        start_at="2026-07-14T09:30",
        timezone="UTC",
    )

    assert outcome.payload["error"] == "tool handler failed: the title is blank"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "arguments",
    [
        {"title": "x", "start_at": "2026-07-14T09:30", "timezone": "UTC", "duration_minutes": 0},
        {"title": "x", "start_at": "2026-07-14T09:30", "timezone": "UTC", "duration_minutes": 1441},
        {"title": "x", "start_at": "2026-07-14T09:30"},
    ],
)
async def test_calendar_schema_rejects_bad_durations_and_missing_fields(
    registry: ToolRegistry, arguments: dict[str, Any]
) -> None:
    outcome = await run(registry, "calendar.schedule.create", **arguments)

    assert outcome.payload["error"].startswith("invalid arguments: ")


# --- device.volume.adjust -----------------------------------------------------------


@pytest.mark.asyncio
async def test_volume_adjustments_clamp_and_report_the_previous_level(
    registry: ToolRegistry,
) -> None:
    steps = [
        ("relative", 5, 50, 55),
        ("absolute", 30, 55, 30),
        ("relative", -50, 30, 0),
        ("absolute", 100, 0, 100),
        ("relative", 10, 100, 100),
        ("absolute", -5, 100, 0),
    ]
    for mode, value, previous, volume in steps:
        outcome = await run(registry, "device.volume.adjust", mode=mode, value=value)
        assert outcome.payload == {
            "tool": "device.volume.adjust",
            "previous": previous,
            "volume": volume,
        }


@pytest.mark.asyncio
async def test_volume_survives_a_new_backend_instance(
    registry: ToolRegistry, agent_lab_home: Path
) -> None:
    await run(registry, "device.volume.adjust", mode="absolute", value=35)

    assert local_backends().device.volume() == 35
    assert tool_rows(agent_lab_home, "SELECT name, value FROM device_settings") == [("volume", 35)]


@pytest.mark.asyncio
async def test_concurrent_relative_adjustments_are_not_lost(
    registry: ToolRegistry, backends: BuiltinBackends
) -> None:
    await run(registry, "device.volume.adjust", mode="absolute", value=0)
    events = [
        call("device.volume.adjust", f"up-{index}", mode="relative", value=1) for index in range(20)
    ]

    payloads = await asyncio.gather(*(registry.execute_async(e, ALL_TOOLS) for e in events))

    assert sorted(payload["volume"] for payload in payloads) == list(range(1, 21))
    assert backends.device.volume() == 20


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "arguments",
    [{"mode": "absolute", "value": 101}, {"mode": "loud", "value": 5}, {"mode": "relative"}],
)
async def test_volume_schema_rejects_out_of_range_or_unknown_modes(
    registry: ToolRegistry, arguments: dict[str, Any]
) -> None:
    outcome = await run(registry, "device.volume.adjust", **arguments)

    assert outcome.payload["error"].startswith("invalid arguments: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Set the volume to 30", {"mode": "absolute", "value": 30}),
        ("volume at 45% please", {"mode": "absolute", "value": 45}),
        ("Turn the volume up to 80.", {"mode": "absolute", "value": 80}),
        ("turn it up by 15", {"mode": "relative", "value": 15}),
        ("Turn the volume down by 20 percent", {"mode": "relative", "value": -20}),
        ("lower the volume by 5", {"mode": "relative", "value": -5}),
        ("a bit louder please", {"mode": "relative", "value": 10}),
        ("Quieter!", {"mode": "relative", "value": -10}),
        ("turn it down", {"mode": "relative", "value": -10}),
        ("volume up", {"mode": "relative", "value": 10}),
        ("louder, louder!", {"mode": "relative", "value": 10}),
        ("mute the sound", {"mode": "absolute", "value": 0}),
        ("Mute.", {"mode": "absolute", "value": 0}),
        ("don't turn it up", {}),
        ("set the volume to 300", {}),
        ("make it louder and then quieter", {}),
        ("turn it up by 10 and set the volume to 40", {}),
        ("mute the microphone", {}),
        ("unmute", {}),
        ("what's the weather in Berlin?", {}),
    ],
)
def test_volume_requests_are_parsed_conservatively(text: str, expected: dict[str, Any]) -> None:
    assert parse_volume_request(text) == expected


@pytest.mark.asyncio
async def test_volume_resolver_reads_the_latest_user_message(registry: ToolRegistry) -> None:
    context = history(
        ("user", "set the volume to 90"),
        ("assistant", "Done."),
        ("user", "now a bit quieter"),
        ("assistant", "Turning it down."),
    )

    resolved = await registry.resolve_arguments(call("device.volume.adjust"), context)

    assert resolved == {"mode": "relative", "value": -10}


@pytest.mark.asyncio
async def test_volume_resolver_resolves_nothing_without_a_clear_request(
    registry: ToolRegistry,
) -> None:
    context = history(("user", "play something"), ("assistant", "Sure."))

    resolved = await registry.resolve_arguments(call("device.volume.adjust"), context)

    assert resolved == {}


# --- session.terminate --------------------------------------------------------------


@pytest.mark.asyncio
async def test_session_terminate_needs_no_arguments_and_coalesces(
    registry: ToolRegistry,
) -> None:
    bare = await run(registry, "session.terminate")
    with_reason = await run(registry, "session.terminate", reason="user said bye")

    assert bare.payload == {"tool": "session.terminate", "status": "terminated"}
    assert with_reason.payload == bare.payload
    first = registry.coalesce_key(call("session.terminate", "a"))
    second = registry.coalesce_key(call("session.terminate", "b", reason="bye"))
    assert first is not None and first == second


# --- knowledge.web.search: local ----------------------------------------------------


@pytest.mark.asyncio
async def test_local_search_over_the_bundled_corpus(
    registry: ToolRegistry, agent_lab_home: Path
) -> None:
    outcome = await run(registry, "knowledge.web.search", query="event batch safety")

    payload = outcome.payload
    assert outcome.ok
    assert payload["tool"] == "knowledge.web.search"
    assert payload["query"] == "event batch safety"
    assert payload["backend"] == "local"
    assert payload["results"][0]["source"] == "event-batches.md"
    assert payload["results"][0]["title"] == "Event batches and result policies"
    assert "batch" in payload["results"][0]["snippet"].lower()
    assert set(payload["results"][0]) == {"title", "snippet", "source", "score"}
    scores = [result["score"] for result in payload["results"]]
    assert scores == sorted(scores, reverse=True)
    assert payload["sources"] == [result["source"] for result in payload["results"]]
    assert len(payload["results"]) <= 5
    assert list((agent_lab_home / "search").glob("index-*.sqlite3"))


@pytest.mark.asyncio
async def test_local_search_respects_max_results(registry: ToolRegistry) -> None:
    outcome = await run(registry, "knowledge.web.search", query="time zone latency", max_results=2)

    assert len(outcome.payload["results"]) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "AND OR NOT",
        "NEAR(wal, checkpoint",
        "wal* -mode ^start",
        "title:volume OR body:",
        "'); DROP TABLE documents; --",
        "日本語のテキスト",
    ],
)
async def test_local_search_never_fails_on_query_syntax(registry: ToolRegistry, query: str) -> None:
    outcome = await run(registry, "knowledge.web.search", query=query)

    assert outcome.ok, outcome.payload
    assert isinstance(outcome.payload["results"], list)


@pytest.mark.asyncio
@pytest.mark.parametrize("query", ["zyxwvutsrq", "?!"])
async def test_local_search_without_matches_is_an_empty_success(
    registry: ToolRegistry, query: str
) -> None:
    outcome = await run(registry, "knowledge.web.search", query=query)

    assert outcome.ok
    assert outcome.payload["results"] == []
    assert outcome.payload["sources"] == []


@pytest.mark.asyncio
async def test_blank_search_query_is_refused(registry: ToolRegistry) -> None:
    outcome = await run(registry, "knowledge.web.search", query="   ")

    assert outcome.payload["error"] == "tool handler failed: the search query is blank"


@pytest.mark.asyncio
async def test_search_resolver_uses_the_latest_user_message(registry: ToolRegistry) -> None:
    context = history(("user", "  What is WAL mode? "), ("assistant", "Let me look."))

    resolved = await registry.resolve_arguments(call("knowledge.web.search"), context)

    assert resolved == {"query": "What is WAL mode?"}
    assert await registry.resolve_arguments(call("knowledge.web.search"), history()) == {}


def write_doc(path: Path, text: str, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.mark.asyncio
async def test_user_corpus_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "notes"
    write_doc(corpus / "fruit.md", "# Citrus guide\n\nThe kumquat is eaten whole, peel and all.")
    write_doc(corpus / "nested" / "plain.txt", "Persimmons ripen after the first frost.")
    write_doc(corpus / ".hidden" / "secret.md", "kumquat persimmon secret")
    write_doc(corpus / "script.py", "kumquat = 'persimmon'")
    monkeypatch.setenv("AGENT_LAB_CORPUS", str(corpus))
    registry = build_default_tool_registry()

    kumquat = await run(registry, "knowledge.web.search", query="kumquat")
    persimmon = await run(registry, "knowledge.web.search", query="persimmons")

    assert kumquat.payload["sources"] == ["fruit.md"]
    assert kumquat.payload["results"][0]["title"] == "Citrus guide"
    assert "kumquat" in kumquat.payload["results"][0]["snippet"]
    assert persimmon.payload["sources"] == ["nested/plain.txt"]
    assert persimmon.payload["results"][0]["title"] == "Plain"


def test_index_follows_file_changes(tmp_path: Path, agent_lab_home: Path) -> None:
    corpus = tmp_path / "docs"
    doc = corpus / "doc.md"
    write_doc(doc, "# Fruit\n\nApples only.", mtime=1_700_000_000)
    search = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)
    assert search.search("kumquat", limit=5) == []

    write_doc(doc, "# Fruit\n\nApples and a kumquat.", mtime=1_700_000_100)
    assert [hit.source for hit in search.search("kumquat", limit=5)] == ["doc.md"]
    assert search.refresh() == 0

    write_doc(corpus / "more.md", "Another kumquat tree.")
    assert {hit.source for hit in search.search("kumquat", limit=5)} == {"doc.md", "more.md"}

    doc.unlink()
    assert [hit.source for hit in search.search("kumquat", limit=5)] == ["more.md"]


def test_two_backends_on_one_index_agree(tmp_path: Path, agent_lab_home: Path) -> None:
    corpus = tmp_path / "docs"
    write_doc(corpus / "a.md", "# Alpha\n\nSQLite checkpoint notes.")
    first = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)
    second = LocalSearchBackend(agent_lab_home, corpus_dir=corpus)

    assert first.index_path == second.index_path
    assert first.search("checkpoint", limit=3) == second.search("checkpoint", limit=3)


@pytest.mark.asyncio
async def test_missing_corpus_folder_is_a_clear_error(tmp_path: Path, agent_lab_home: Path) -> None:
    backends = local_backends(corpus_dir=tmp_path / "nowhere")
    registry = ToolRegistry(builtin_tool_definitions(backends))

    outcome = await run(registry, "knowledge.web.search", query="anything")

    assert outcome.payload["error"] == (
        f"tool handler failed: search corpus folder {tmp_path / 'nowhere'} does not exist"
    )


def test_bundled_corpus_ships_short_markdown_documents() -> None:
    documents = sorted(bundled_corpus_dir().glob("*.md"))

    assert 8 <= len(documents) <= 15
    for document in documents:
        text = document.read_text(encoding="utf-8")
        assert text.startswith("# ")
        assert len(text.split()) < 400


# --- knowledge.web.search: HTTP -----------------------------------------------------


class SearchServer:
    """A SearXNG-like JSON endpoint on 127.0.0.1 with a few misbehaving paths."""

    def __init__(self) -> None:
        self.requests: list[dict[str, list[str]]] = []
        self.results: list[Any] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                server.requests.append(parse_qs(url.query))
                if url.path == "/error":
                    self._send(500, b'{"error": "down"}')
                elif url.path == "/html":
                    self._send(200, b"<html>not json</html>", "text/html")
                elif url.path == "/no-results":
                    self._send(200, b'{"answers": []}')
                elif url.path == "/slow":
                    time.sleep(1.0)
                    self._send(200, b'{"results": []}')
                else:
                    self._send(200, json.dumps({"results": server.results}).encode())

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (the timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SearchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def search_server() -> Iterator[SearchServer]:
    with SearchServer() as server:
        yield server


def http_registry(url: str, *, timeout: float = 5.0) -> ToolRegistry:
    backends = replace(local_backends(), search=HttpSearchBackend(url, timeout=timeout))
    return ToolRegistry(builtin_tool_definitions(backends))


@pytest.mark.asyncio
async def test_http_search_maps_searxng_results(
    search_server: SearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    search_server.results = [
        {
            "title": "WAL mode",
            "content": "Write-ahead\n logging.",
            "url": "https://a.example/wal",
            "score": 2.5,
        },
        {"title": "No score", "content": "Second.", "url": "https://b.example/"},
        {"content": "neither title nor url"},
        "not an object",
        {"title": "Third", "content": "x", "url": "https://c.example/"},
    ]
    monkeypatch.setenv("AGENT_LAB_SEARCH_URL", f"{search_server.base}/search?engines=docs")
    registry = build_default_tool_registry()

    outcome = await run(registry, "knowledge.web.search", query="wal mode", max_results=2)

    assert outcome.ok
    assert outcome.payload == {
        "tool": "knowledge.web.search",
        "query": "wal mode",
        "backend": "http",
        "results": [
            {
                "title": "WAL mode",
                "snippet": "Write-ahead logging.",
                "source": "https://a.example/wal",
                "score": 2.5,
            },
            {
                "title": "No score",
                "snippet": "Second.",
                "source": "https://b.example/",
                "score": 0.5,
            },
        ],
        "sources": ["https://a.example/wal", "https://b.example/"],
    }
    assert search_server.requests == [{"engines": ["docs"], "q": ["wal mode"], "format": ["json"]}]


@pytest.mark.asyncio
async def test_http_search_without_results_is_an_empty_success(
    search_server: SearchServer,
) -> None:
    outcome = await run(
        http_registry(f"{search_server.base}/search"), "knowledge.web.search", query="x"
    )

    assert outcome.ok
    assert outcome.payload["results"] == []
    assert outcome.payload["sources"] == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/error", "search backend {base}/error answered HTTP 500"),
        ("/html", "search backend {base}/html did not answer JSON"),
        ("/no-results", "search backend {base}/no-results answered JSON without a results list"),
    ],
)
async def test_http_search_failures_are_clear_errors(
    search_server: SearchServer, path: str, error: str
) -> None:
    registry = http_registry(f"{search_server.base}{path}?token=s3cret")

    outcome = await run(registry, "knowledge.web.search", query="anything")

    expected = error.format(base=search_server.base)
    assert outcome.payload == {
        "tool": "knowledge.web.search",
        "error": f"tool handler failed: {expected}",
    }
    assert "s3cret" not in outcome.payload["error"]


@pytest.mark.asyncio
async def test_http_search_timeout_is_an_error(search_server: SearchServer) -> None:
    registry = http_registry(f"{search_server.base}/slow", timeout=0.2)

    outcome = await run(registry, "knowledge.web.search", query="anything")

    assert outcome.payload["error"] == (
        f"tool handler failed: search backend {search_server.base}/slow did not answer within 0.2s"
    )


@pytest.mark.asyncio
async def test_unreachable_http_search_is_an_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    registry = http_registry(f"http://127.0.0.1:{port}/search", timeout=2)

    outcome = await run(registry, "knowledge.web.search", query="anything")

    assert outcome.payload["error"].startswith(
        f"tool handler failed: could not reach search backend http://127.0.0.1:{port}/search"
    )


@pytest.mark.parametrize("url", ["ftp://example.org/search", "not a url", "/relative/path"])
def test_search_url_must_be_http(url: str) -> None:
    with pytest.raises(ConfigError):
        local_backends(search_url=url)


# --- data directory and ports -------------------------------------------------------


def test_data_home_honours_agent_lab_home(agent_lab_home: Path) -> None:
    assert not agent_lab_home.exists()

    assert data_home() == agent_lab_home
    assert agent_lab_home.is_dir()


def test_data_home_defaults_to_the_platform_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_LAB_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user" / "data"))

    home = data_home()

    assert home == Path(platformdirs.user_data_dir("agent-lab"))
    assert home.is_relative_to(tmp_path)
    assert home.is_dir()


@pytest.mark.asyncio
async def test_unusable_storage_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data directory should be")
    registry = ToolRegistry(builtin_tool_definitions(local_backends(blocker)))

    outcome = await run(registry, "handoff_note", message="hello")

    assert outcome.payload["error"].startswith("tool handler failed: tool storage ")


def test_builtin_tool_error_is_a_value_error_and_a_tool_failure() -> None:
    assert issubclass(BuiltinToolError, ValueError)
    assert issubclass(BuiltinToolError, ToolFailed)


class MemoryNoteBook:
    def __init__(self) -> None:
        self.notes: list[Note] = []

    def add_note(self, message: str, *, session_id: str | None = None) -> Note:
        note = Note(f"n{len(self.notes)}", message, session_id, datetime.now(UTC))
        self.notes.append(note)
        return note

    def list_notes(self) -> list[Note]:
        return list(self.notes)


class FixedSearch:
    @property
    def name(self) -> Literal["local"]:
        return "local"

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        hit = SearchHit(title="T", snippet=query, source="memo.md", score=1.0)
        return [hit, hit]


@pytest.mark.asyncio
async def test_tools_run_against_any_backends_that_fit_the_ports(tmp_path: Path) -> None:
    notes = MemoryNoteBook()
    backends = replace(local_backends(tmp_path), notes=notes, search=FixedSearch())
    registry = ToolRegistry(builtin_tool_definitions(backends))

    await run(registry, "handoff_note", message="kept in memory")
    search = await run(registry, "knowledge.web.search", query="q", max_results=1)

    assert [note.message for note in notes.list_notes()] == ["kept in memory"]
    assert not (tmp_path / TOOLS_DATABASE_NAME).exists()
    assert search.payload["results"] == [
        {"title": "T", "snippet": "q", "source": "memo.md", "score": 1.0}
    ]
    assert search.payload["sources"] == ["memo.md"]


def test_calendar_port_round_trips_entries(tmp_path: Path) -> None:
    calendar = SQLiteCalendar(tmp_path / "cal.sqlite3")
    start = datetime(2026, 12, 24, 18, 0, tzinfo=ZoneInfo("Europe/Vienna"))

    stored = calendar.add_entry(CalendarEntry("Dinner", start, "Europe/Vienna", 120))

    assert calendar.list_entries() == [stored]
    assert stored.entry_id


@pytest.mark.asyncio
async def test_first_use_of_the_shared_tools_file_by_concurrent_handlers_never_fails(
    tmp_path: Path,
) -> None:
    # notes, calendar and volume share one SQLite file; its first-use setup once raced
    from agent_lab.application.tools import build_default_tool_registry
    from agent_lab.infrastructure.tool_backends.backends import local_backends

    schedule = {
        "title": "Design review",
        "start_at": "2026-07-14T09:30:00+08:00",
        "timezone": "Asia/Shanghai",
    }
    errors = []
    for attempt in range(40):
        registry = build_default_tool_registry(local_backends(tmp_path / f"home-{attempt}"))
        calls = [
            ToolCallEvent(id="c", name="calendar.schedule.create", arguments=schedule),
            ToolCallEvent(
                id="v", name="device.volume.adjust", arguments={"mode": "absolute", "value": 3}
            ),
            ToolCallEvent(id="n", name="handoff_note", arguments={"message": "remember"}),
        ]
        results = await asyncio.gather(*(registry.execute_async(call) for call in calls))
        errors += [result["error"] for result in results if "error" in result]
    assert errors == []


@pytest.mark.parametrize(
    ("message", "query"),
    [
        ("Search the local corpus for SQLite WAL.", "SQLite WAL"),
        ("Search the local corpus for SQLite WAL and tell me about it.", "SQLite WAL"),
        ("Look up full-text search with BM25.", "full-text search with BM25"),
        ("Can you google the weather in Oslo, and then summarize it.", "weather in Oslo"),
        ("What is WAL mode?", "What is WAL mode?"),
        ("search", "search"),
        ("What is full-text search?", "What is full-text search?"),
        ("Search for sqlite wal and set the volume to 20", "sqlite wal"),
        ("Set the volume to 20 and search for sqlite wal.", "sqlite wal"),
        ("search the web for salt and pepper", "salt and pepper"),
        ("Hi. Please look up BM25 ranking, then schedule a review", "BM25 ranking"),
    ],
)
def test_the_search_resolver_leaves_the_asking_out_of_the_query(message: str, query: str) -> None:
    assert search_query(message) == query
