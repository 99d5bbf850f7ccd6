"""``POST /api/sessions/{id}/check``, over a real uvicorn server: a ``start`` message is
answered with the very error frame the session's socket sends for it (or ``ok``), and
nothing starts, stops or is stored, live session or not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from agent_lab.interfaces.web.limits import MAX_FRAME_BYTES
from tests.web.test_hardening import frames_until, lab_of, of_type
from tests.web.web_support import ServedLab, changed_start, lab_settings, served

KEY = "sk-typed-CHECK-5be01f9a"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    with served(lab_settings(tmp_path_factory.mktemp("start-check"))) as served_lab:
        yield served_lab


def check(srv: ServedLab, session: str, body: str) -> dict[str, Any]:
    response = httpx.post(f"{srv.base_url}/api/sessions/{session}/check", content=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def socket_answer(srv: ServedLab, session: str, body: str) -> dict[str, Any]:
    with connect(f"{srv.ws_url}/ws/sessions/{session}", proxy=None) as ws:
        ws.send(body)
        frame: dict[str, Any] = json.loads(ws.recv(timeout=20))
    return frame


REFUSED: dict[str, dict[str, Any]] = {
    "parallelism": {"event_agent__max_parallel_events": 0},
    "over the limit": {"event_agent__max_parallel_events": 99},
    "temperature": {"chat_agent__temperature": 2.5},
    "unknown tool": {"event_agent__enabled_tools": ["device.volume.adjust", "nope"]},
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_refused_start_gets_the_error_frame_the_socket_sends_and_nothing_is_stored(
    srv: ServedLab, name: str
) -> None:
    session = f"check-{name.replace(' ', '-')}"
    start = changed_start(lab_of(srv), "Set the volume to 20", **REFUSED[name])
    start["connection"] = {"base_url": None, "api_key": KEY}
    body = json.dumps(start)
    answer = check(srv, session, body)
    assert answer["ok"] is False
    assert answer["error"] == socket_answer(srv, session, body)
    assert answer["error"]["field"].startswith("request.")
    assert KEY not in json.dumps(answer)
    assert httpx.get(f"{srv.base_url}/api/sessions/{session}").status_code == 404


def test_an_endpoint_that_is_not_http_a_message_that_is_not_a_start_and_a_huge_body_are_refused(
    srv: ServedLab,
) -> None:
    start = changed_start(lab_of(srv), "hello")
    start["connection"] = {"base_url": "ftp://203.0.113.9/v1", "api_key": None}
    answer = check(srv, "check-endpoint", json.dumps(start))
    assert answer["error"]["field"] == "connection.base_url"
    assert answer["error"] == socket_answer(srv, "check-endpoint", json.dumps(start))
    not_start = check(srv, "check-endpoint", json.dumps({"type": "user", "content": "hi"}))
    assert not_start["error"]["field"] == "type"
    too_large = httpx.post(
        f"{srv.base_url}/api/sessions/check-endpoint/check", content=b"x" * (MAX_FRAME_BYTES + 1)
    )
    assert too_large.status_code == 413


def test_a_valid_start_is_ok_and_leaves_the_live_session_as_it_was(srv: ServedLab) -> None:
    lab = lab_of(srv)
    with connect(f"{srv.ws_url}/ws/sessions/check-live", proxy=None) as ws:
        ws.send(json.dumps(changed_start(lab, "Set the volume to 20")))
        frames_until(ws, of_type("turn_completed"))
        changed = changed_start(lab, "Set the volume to 30", chat_agent__temperature=1.3)
        assert check(srv, "check-live", json.dumps(changed)) == {"ok": True, "error": None}
        refused = changed_start(lab, "Set the volume to 30", chat_agent__temperature=9)
        assert check(srv, "check-live", json.dumps(refused))["ok"] is False
        ws.send(json.dumps({"type": "user", "content": "Set the volume to 40"}))
        frames_until(ws, of_type("turn_completed"))  # the same runtime runs the next turn
    record = httpx.get(f"{srv.base_url}/api/sessions/check-live").json()
    events = [audit["event"] for audit in record["audit"]]
    assert events.count("session_started") == 1 and "session_finished" not in events
    assert [turn["user_message"] for turn in record["turns"]] == [
        "Set the volume to 20",
        "Set the volume to 40",
    ]
