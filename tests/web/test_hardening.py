"""The web lab under abuse, against a real uvicorn server: tokens, queue and rate bounds,
start-request limits, the endpoint allowlist, masking of secrets and REST hygiene."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from web_support import ServedLab, lab_settings, served, start_message
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from agent_lab.interfaces.cli.serve import web_options
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import WebOptions, create_app
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

TOKEN = "a-long-lab-token-0123456789"
SECRET = "sk-web-SECRET-7c2e9a41d0"


def lab_of(srv: ServedLab) -> Lab:
    assert srv.lab is not None
    return srv.lab


def frames_until(ws: ClientConnection, stop: Any, timeout: float = 20) -> list[dict[str, Any]]:
    """Frames (stream messages unwrapped) until ``stop(frame)`` holds for one."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        message = frame["message"] if "offset" in frame else frame
        seen.append(message)
        if stop(message):
            return seen


def of_type(*kinds: str) -> Any:
    return lambda message: message.get("type") in kinds


def started_turn(message: dict[str, Any]) -> bool:
    return message.get("type") == "audit" and message.get("event") == "turn_started"


def wait_until(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.05)


def record(srv: ServedLab, session_id: str, **headers: str) -> dict[str, Any]:
    response = httpx.get(f"{srv.base_url}/api/sessions/{session_id}", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# ------------------------------------------------------------------ 1. tokens


@pytest.mark.parametrize(("token", "says"), [("", "must not be empty"), ("short", "too short")])
def test_serve_off_loopback_refuses_an_empty_or_short_token(
    token: str, says: str, lab_home: Path
) -> None:
    command = [sys.executable, "-m", "agent_lab", "serve", "--host", "0.0.0.0", "--port", "0"]
    done = subprocess.run(
        [*command, "--token", token], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert says in done.stderr and "--token" in done.stderr
    assert "web lab on" not in done.stdout


def test_an_empty_token_is_refused_by_create_app(settings: LabSettings) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        create_app(Lab(settings), token="")


def token_protocol(token: str) -> str:
    return "agent-lab.token." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def test_the_socket_token_rides_in_the_subprotocol_header(settings: LabSettings) -> None:
    with served(settings, token=TOKEN) as srv:
        url = srv.ws_url + "/ws/sessions/proto"
        with connect(url, proxy=None, subprotocols=["agent-lab", token_protocol(TOKEN)]) as ws:
            ws.send(json.dumps(start_message(lab_of(srv), "hello")))
            frames = frames_until(ws, of_type("turn_completed"))
            chosen = ws.subprotocol
        refused = []
        for bad in (["agent-lab", token_protocol("wrong")], ["agent-lab", "agent-lab.token."]):
            with connect(url, proxy=None, subprotocols=bad) as ws:  # type: ignore[arg-type]
                refused.append(close_code(ws))
        with connect(url + "?token=", proxy=None) as ws:
            refused.append(close_code(ws))
    assert chosen == "agent-lab"
    assert frames[0]["type"] == "attached"
    assert refused == [4401, 4401, 4401]


def close_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd is not None else None


# ------------------------------------------------------------------ 2. queue and rate


def slow_settings(home: Path) -> LabSettings:
    return lab_settings(home, simulated_ttft_ms=400, simulated_tokens_per_second=40)


def answers_of(ws: ClientConnection, count: int) -> list[dict[str, Any]]:
    """The next ``count`` answers to ``user`` commands (``queued`` / ``error`` frames)."""
    answers: list[dict[str, Any]] = []

    def enough(message: dict[str, Any]) -> bool:
        if message.get("type") in ("queued", "error") and "offset" not in message:
            answers.append(message)
        return len(answers) == count

    frames_until(ws, enough)
    return answers


def test_the_queue_is_bounded_and_close_drops_it(lab_home: Path) -> None:
    with served(slow_settings(lab_home)) as srv:
        with connect(srv.ws_url + "/ws/sessions/flood", proxy=None) as ws:
            ws.send(json.dumps(start_message(lab_of(srv), "Set the volume to 20")))
            frames_until(ws, started_turn)
            for index in range(12):
                ws.send(json.dumps({"type": "user", "content": f"again {index}"}))
            answers = answers_of(ws, 12)
            ws.send(json.dumps({"type": "close"}))
            dropped = frames_until(ws, of_type("dropped"))[-1]
            frames_until(ws, of_type("detached"))
        wait_until(lambda: record(srv, "flood")["live"] is False)
        turns = record(srv, "flood")["turns"]
    assert [a.get("count") for a in answers[:8]] == list(range(1, 9))
    assert all(a["type"] == "error" and a["field"] == "queue" for a in answers[8:])
    assert "queue full" in answers[8]["message"]
    assert dropped["count"] == 8
    assert [turn["user_message"] for turn in turns] == ["Set the volume to 20"]


def test_a_disconnect_drops_the_queued_turns(lab_home: Path) -> None:
    with served(slow_settings(lab_home)) as srv:
        with connect(srv.ws_url + "/ws/sessions/gone", proxy=None) as ws:
            ws.send(json.dumps(start_message(lab_of(srv), "Set the volume to 20")))
            frames_until(ws, started_turn)
            for index in range(3):
                ws.send(json.dumps({"type": "user", "content": f"later {index}"}))
            answers_of(ws, 3)
        with connect(srv.ws_url + "/ws/sessions/gone", proxy=None) as ws:
            ws.send(json.dumps({"type": "start", "resume_from": None}))
            frames_until(ws, of_type("attached"))
            ws.send(json.dumps({"type": "user", "content": "final"}))
            frames_until(ws, lambda m: m.get("type") == "user_message" and m["content"] == "final")
            frames_until(ws, of_type("turn_completed", "error"))
        turns = record(srv, "gone")["turns"]
    # The three turns queued by the client that left never ran.
    assert [turn["user_message"] for turn in turns] == ["Set the volume to 20", "final"]


def test_a_client_over_its_rate_is_refused(lab_home: Path) -> None:
    options = WebOptions(rate_burst=4, rate_per_second=0.001, queue_limit=50)
    with served(slow_settings(lab_home), options=options) as srv:
        with connect(srv.ws_url + "/ws/sessions/rate", proxy=None) as ws:
            ws.send(json.dumps(start_message(lab_of(srv), "Set the volume to 20")))
            frames_until(ws, started_turn)
            for index in range(5):
                ws.send(json.dumps({"type": "user", "content": f"more {index}"}))
            answers = answers_of(ws, 5)
        with connect(srv.ws_url + "/ws/sessions/rate-2", proxy=None) as other:
            other.send(json.dumps(start_message(lab_of(srv), "hello")))
            refused = frames_until(other, of_type("error", "attached"))[-1]
    assert [a["type"] for a in answers] == ["queued"] * 3 + ["error", "error"]
    assert answers[-1]["field"] == "rate" and "rate limit" in answers[-1]["message"]
    assert refused["type"] == "error" and refused["field"] == "rate"
