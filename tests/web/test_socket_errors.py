"""Every refused WebSocket message, over a real uvicorn server: one error frame of the
documented shape ``{"type": "error", "message", "field"}`` whose ``field`` is the dotted
path inside the message, named the same in the message, no Python class name, no value
repeated, the socket still usable, and nothing stored for a refused start."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from tests.web.web_support import ServedLab, changed_start, lab_settings, served

CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b")
"""A CamelCase word such as ``UnknownTools`` or ``ValidationError``."""


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    with served(lab_settings(tmp_path_factory.mktemp("socket-errors"))) as served_lab:
        yield served_lab


def start(srv: ServedLab, text: str, **request: Any) -> dict[str, Any]:
    assert srv.lab is not None
    return changed_start(srv.lab, text, **request)


def refused(ws: Connection, payload: str) -> dict[str, Any]:
    """The answer to ``payload``, which must be an error frame."""
    ws.send(payload)
    frame: dict[str, Any] = json.loads(ws.recv(timeout=20))
    assert frame["type"] == "error", frame
    return frame


def assert_documented(error: dict[str, Any], field: str) -> None:
    assert set(error) == {"type", "message", "field"}
    assert error["field"] == field
    assert f"{field}: " in error["message"]  # the message names the same path
    assert CLASS_NAME.search(error["message"]) is None, error["message"]


def stored_ids(srv: ServedLab) -> list[str]:
    sessions = httpx.get(srv.base_url + "/api/sessions").json()["sessions"]
    return [session["id"] for session in sessions]


@pytest.mark.parametrize("text", ["Set the volume to 20", ""])
def test_an_unknown_tool_is_refused_with_its_field_and_nothing_is_stored(
    srv: ServedLab, text: str
) -> None:
    session_id = f"unknown-tool-{len(text)}"
    bad = start(srv, text, event_agent__enabled_tools=["device.volume.adjust", "nope"])
    with connect(f"{srv.ws_url}/ws/sessions/{session_id}", proxy=None) as ws:
        error = refused(ws, json.dumps(bad))
        ws.send(json.dumps({"type": "cancel"}))  # the socket is still usable
        after = json.loads(ws.recv(timeout=20))
    assert_documented(error, "request.event_agent.enabled_tools")
    assert error["message"].startswith("invalid request — request.event_agent.enabled_tools: ")
    assert "unknown tool(s) 'nope'" in error["message"]
    assert after == {"type": "cancelled", "accepted": False}
    assert httpx.get(f"{srv.base_url}/api/sessions/{session_id}").status_code == 404
    assert session_id not in stored_ids(srv)


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        ('{"type": "user"}', "content", "invalid message — content: Field required"),
        (
            '{"type": "user", "content": ""}',
            "content",
            "invalid message — content: String should have at least 1 character",
        ),
        ('{"type": "user", "content": "hi", "extra": 1}', "extra", None),
        ("not json", "message", None),
        ("[1, 2]", "message", None),
        (
            '{"type": "launch-the-missiles"}',
            "type",
            "invalid message — type: unknown or missing message type; expected one of "
            "'start', 'user', 'cancel', 'close', 'drop_queued'",
        ),
        ("{}", "type", None),
        ('{"type": "start"}', "request", "request: required to start a session that is not live"),
        ('{"type": "start", "request": [1]}', "request", None),
        ('{"type": "start", "resume_from": -5}', "resume_from", None),
        ('{"type": "start", "connection": {"base_url": 1}}', "connection.base_url", None),
        ('{"type": "cancel", "now": true}', "now", None),
    ],
)
def test_every_invalid_message_names_its_field_path(
    srv: ServedLab, payload: str, field: str, message: str | None
) -> None:
    with connect(f"{srv.ws_url}/ws/sessions/bad-message", proxy=None) as ws:
        error = refused(ws, payload)
    assert_documented(error, field)
    if message is not None:
        assert error["message"] == message
    assert "launch-the-missiles" not in error["message"]  # values are never repeated


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"chat_agent__temperature": 7}, "request.chat_agent.temperature"),
        ({"chat_agent__model": None}, "request.chat_agent.model"),
        ({"tool_invocation_mode": "telepathy"}, "request.tool_invocation_mode"),
        ({"bogus": 1}, "request.bogus"),
        ({"event_agent__enabled_tools": ["t"] * 101}, "request.event_agent.enabled_tools"),
    ],
)
def test_an_invalid_start_request_is_refused_and_nothing_is_stored(
    srv: ServedLab, changes: dict[str, Any], field: str
) -> None:
    session_id = "invalid-" + field.replace(".", "-")
    with connect(f"{srv.ws_url}/ws/sessions/{session_id}", proxy=None) as ws:
        error = refused(ws, json.dumps(start(srv, "Set the volume to 20", **changes)))
    assert_documented(error, field)
    assert "telepathy" not in error["message"]
    assert session_id not in stored_ids(srv)


@pytest.mark.parametrize("base_url", ["ftp://nowhere", "http://", "https://[::1"])
def test_a_refused_connection_override_names_its_field(srv: ServedLab, base_url: str) -> None:
    bad = start(srv, "hello")
    bad["connection"] = {"base_url": base_url}
    with connect(f"{srv.ws_url}/ws/sessions/bad-endpoint", proxy=None) as ws:
        error = refused(ws, json.dumps(bad))
    assert_documented(error, "connection.base_url")
    assert base_url not in error["message"]
    assert "bad-endpoint" not in stored_ids(srv)


def test_state_errors_carry_no_class_name(srv: ServedLab) -> None:
    with connect(f"{srv.ws_url}/ws/sessions/not-started", proxy=None) as ws:
        error = refused(ws, '{"type": "user", "content": "hi"}')
    assert error["message"].startswith("no live session here")
    assert CLASS_NAME.search(error["message"]) is None
