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
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.connection import Connection
from websockets.typing import Subprotocol

from agent_lab.interfaces.cli.serve import web_options
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import WebOptions, create_app
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.web_support import (
    ServedLab,
    changed_start,
    lab_settings,
    served,
    start_message,
    token_protocol,
)

TOKEN = "a-long-lab-token-0123456789"
SECRET = "sk-web-SECRET-7c2e9a41d0"


def lab_of(srv: ServedLab) -> Lab:
    assert srv.lab is not None
    return srv.lab


def frames_until(ws: Connection, stop: Any, timeout: float = 20) -> list[dict[str, Any]]:
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


def test_the_socket_token_rides_in_the_subprotocol_header(settings: LabSettings) -> None:
    with served(settings, token=TOKEN) as srv:
        url = srv.ws_url + "/ws/sessions/proto"
        with connect(
            url,
            proxy=None,
            subprotocols=[Subprotocol("agent-lab"), Subprotocol(token_protocol(TOKEN))],
        ) as ws:
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


def close_code(ws: Connection) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd is not None else None


# ------------------------------------------------------------------ 2. queue and rate


def slow_settings(home: Path) -> LabSettings:
    return lab_settings(home, simulated_ttft_ms=400, simulated_tokens_per_second=40)


def answers_of(ws: Connection, count: int) -> list[dict[str, Any]]:
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


# ------------------------------------------------------------------ 3. start-request limits


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"system_prompts": ["x" * 10_000_000]}, "request.system_prompts.0"),
        ({"padding": "x" * 2_000_000}, "message"),
        ({"system_prompts": ["x" * 60_000]}, "request.system_prompts.0"),
        ({"system_prompts": ["x"] * 21}, "request.system_prompts"),
        ({"user_message": "x" * 100_001}, "request.user_message"),
        ({"pre_messages": [{"role": "user", "content": "hi"}] * 201}, "request.pre_messages"),
        ({"chat_agent__model": "m" * 201}, "request.chat_agent.model"),
        ({"chat_agent__extra_body": {"pad": "x" * 20_000}}, "request.chat_agent.extra_body"),
        ({"chat_agent__max_tokens": 10**9}, "request.chat_agent.max_tokens"),
        ({"chat_agent__temperature": 7}, "request.chat_agent.temperature"),
        ({"event_agent__enabled_tools": ["t"] * 101}, "request.event_agent.enabled_tools"),
        ({"event_agent__max_event_loops": 1000}, "request.event_agent.max_event_loops"),
        ({"event_agent__max_parallel_events": 1000}, "request.event_agent.max_parallel_events"),
    ],
)
def test_every_field_of_the_start_request_is_limited(
    changes: dict[str, Any], field: str, lab_home: Path
) -> None:
    with served(lab_settings(lab_home)) as srv:
        with connect(srv.ws_url + "/ws/sessions/big", proxy=None, max_size=None) as ws:
            ws.send(json.dumps(changed_start(lab_of(srv), "hello", **changes)))
            error = json.loads(ws.recv(timeout=20))
            ws.send(json.dumps(start_message(lab_of(srv), "hello")))  # still usable
            attached = json.loads(ws.recv(timeout=20))
        stored = httpx.get(srv.base_url + "/api/sessions").json()["sessions"]
    assert error["type"] == "error" and error["field"] == field
    assert field in error["message"] and len(error["message"]) < 300
    assert attached["type"] == "attached"
    assert [session["id"] for session in stored] == ["big"]  # only the valid start ran


# ------------------------------------------------------------------ 4. endpoint allowlist


def chat_reply(text: str) -> ScriptedResponse:
    delta = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    return ScriptedResponse.sse(delta)


def test_off_loopback_only_allowlisted_endpoints_are_fetched(lab_home: Path) -> None:
    allowed = SSETranscriptServer(chat_reply("from the allowed one"))
    probed = SSETranscriptServer(chat_reply("never"))
    with allowed, probed:
        options = web_options("0.0.0.0", [allowed.base_url + "/"])
        served_lab = served(lab_settings(lab_home), options=options)
        with served_lab as srv, connect(srv.ws_url + "/ws/sessions/ssrf", proxy=None) as ws:
            probe = {"base_url": probed.base_url, "api_key": SECRET}
            ws.send(json.dumps(start_message(lab_of(srv), "hi", connection=probe)))
            refused = json.loads(ws.recv(timeout=20))
            good = {"base_url": allowed.base_url, "api_key": SECRET}
            ws.send(json.dumps(start_message(lab_of(srv), "hi", connection=good)))
            frames = frames_until(ws, of_type("turn_completed", "error"))
    assert options.allowed_endpoints == (allowed.base_url + "/",)
    assert refused["type"] == "error" and refused["field"] == "connection.base_url"
    assert probed.base_url not in refused["message"]
    assert probed.requests == []  # the server never reached the probed port
    assert frames[-1]["type"] == "turn_completed"
    assert any(m.get("content") == "from the allowed one" for m in frames)


def test_off_loopback_provider_bodies_are_cut_short(lab_home: Path) -> None:
    body = {"error": {"message": "internal detail " * 500}}
    provider = SSETranscriptServer(fallback=ScriptedResponse.error(500, body))
    with provider:
        options = web_options("0.0.0.0", [provider.base_url])
        settings = lab_settings(lab_home, max_retries=0)
        served_lab = served(settings, options=options)
        with served_lab as srv, connect(srv.ws_url + "/ws/sessions/body", proxy=None) as ws:
            override = {"base_url": provider.base_url, "api_key": SECRET}
            ws.send(json.dumps(start_message(lab_of(srv), "hi", connection=override)))
            error = frames_until(ws, of_type("error"))[-1]
    assert "internal detail" in error["message"]
    assert len(error["message"]) <= 201


def test_the_config_file_adds_allowed_endpoints(tmp_path: Path, lab_home: Path) -> None:
    from agent_lab.interfaces.cli.serve import _config_endpoints

    config = tmp_path / "lab.toml"
    config.write_text('[agent_lab]\n[web]\nallow_endpoints = ["https://llm.internal/v1"]\n')
    endpoints = _config_endpoints(config)
    options = web_options("0.0.0.0", endpoints)
    assert options.endpoint_allowed("HTTPS://LLM.internal/v1/", None)
    assert not options.endpoint_allowed("http://127.0.0.1:22/v1", None)
    assert web_options("127.0.0.1", []).endpoint_allowed("http://anything:1/v1", None)


# ------------------------------------------------------------------ 5. masking


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_secrets_are_masked_in_any_case_encoding_and_url(lab_home: Path) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    echo = f"bad key {SECRET.upper()} / {SECRET.lower()} / {encoded}"
    provider = SSETranscriptServer(fallback=ScriptedResponse.error(401, {"error": echo}))
    settings = lab_settings(lab_home, max_retries=0)
    url = f"http://alice:pa55w0rd-XYZ@127.0.0.1:{closed_port()}/v1?api-key=QWERTY-9876"
    texts: list[str] = []
    with provider, served(settings) as srv:
        for session_id, connection in (
            ("echo", {"base_url": provider.base_url, "api_key": SECRET}),
            ("creds", {"base_url": url}),
        ):
            with connect(f"{srv.ws_url}/ws/sessions/{session_id}", proxy=None) as ws:
                ws.send(json.dumps(start_message(lab_of(srv), "hi", connection=connection)))
                frames = frames_until(ws, of_type("error"))
                texts += [json.dumps(f) for f in frames]
                # Another tab replays the same frames: masked for it too.
                with connect(f"{srv.ws_url}/ws/sessions/{session_id}", proxy=None) as tab:
                    stream_id = frames[0]["stream_id"]
                    resume = {"type": "start", "resume_from": -1, "stream_id": stream_id}
                    tab.send(json.dumps(resume))
                    replayed = frames_until(tab, of_type("error"))
                    texts += [json.dumps(f) for f in replayed]
            texts.append(httpx.get(f"{srv.base_url}/api/sessions/{session_id}").text)
            texts.append(httpx.get(f"{srv.base_url}/api/sessions/{session_id}/export").text)
    everything = "\n".join(texts)
    assert everything.count("bad key ***") >= 2  # shown to both tabs, masked
    assert "***@127.0.0.1" in everything
    assert "***@127.0.0.1" in everything
    for leaked in (SECRET.upper(), SECRET.lower(), encoded, "pa55w0rd-XYZ", "QWERTY-9876"):
        assert leaked not in everything


# ------------------------------------------------------------------ 6. REST hygiene


def test_long_ids_are_not_reflected_and_nosniff_is_everywhere(settings: LabSettings) -> None:
    long_id = "x" * 60_000
    with served(settings, token=TOKEN) as srv:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=srv.base_url, headers=auth) as client:
            answers = [
                client.get(f"/api/sessions/{long_id}"),
                client.get(f"/api/sessions/{long_id}/export"),
                client.delete(f"/api/sessions/{long_id}"),
                client.get("/api/sessions/short-unknown"),
            ]
            invalid = client.get("/api/sessions/x/export", params={"format": "A" * 5000})
            others = [
                client.get("/"),
                client.get("/static/app.js"),
                client.get("/api/health"),
                httpx.get(srv.base_url + "/api/health"),  # 401
            ]
    assert [answer.status_code for answer in answers] == [404] * 4
    assert all(answer.json() == {"detail": "no such session"} for answer in answers)
    assert all(len(answer.content) < 100 for answer in answers)
    assert [answer.status_code for answer in others] == [200, 200, 200, 401]
    assert invalid.status_code == 422 and "AAAA" not in invalid.text
    assert all(a.headers["x-content-type-options"] == "nosniff" for a in [*answers, *others])


def one_closed_turn(srv: ServedLab, session_id: str) -> None:
    """Run one turn of ``session_id`` in a tab, close the session and wait until it is
    no longer live (only its stored record is left)."""
    with connect(srv.ws_url + f"/ws/sessions/{session_id}", proxy=None) as first:
        first.send(json.dumps(start_message(lab_of(srv), "hello")))
        frames_until(first, of_type("turn_completed"))
        first.send(json.dumps({"type": "close"}))
        frames_until(first, of_type("detached"))
    wait_until(lambda: record(srv, session_id)["live"] is False)


def test_a_tab_is_told_when_its_session_is_deleted(settings: LabSettings) -> None:
    with served(settings) as srv:
        url = srv.ws_url + "/ws/sessions/doomed"
        one_closed_turn(srv, "doomed")
        with connect(url, proxy=None) as tab:
            tab.send(json.dumps(start_message(lab_of(srv), "")))
            frames_until(tab, of_type("history"))
            deleted = httpx.delete(srv.base_url + "/api/sessions/doomed")
            notice = frames_until(tab, of_type("deleted"))[-1]
            tab.send(json.dumps({"type": "user", "content": "are you there?"}))
            refused = frames_until(tab, of_type("error"))[-1]
        gone = httpx.get(srv.base_url + "/api/sessions/doomed")
    assert deleted.status_code == 204
    assert notice == {"type": "deleted", "session_id": "doomed"}
    assert refused["field"] == "session" and "deleted" in refused["message"]
    assert gone.status_code == 404  # not silently re-created as turn 1


def test_a_tab_opening_a_deleted_session_is_told_so(settings: LabSettings) -> None:
    with served(settings) as srv:
        url = srv.ws_url + "/ws/sessions/gone-away"
        one_closed_turn(srv, "gone-away")
        deleted = httpx.delete(srv.base_url + "/api/sessions/gone-away")
        # A tab that was away (asleep, reloaded) opens it again: told, not re-created.
        with connect(url, proxy=None) as tab:
            tab.send(json.dumps({**start_message(lab_of(srv), ""), "resume_from": 12}))
            notice = frames_until(tab, of_type("deleted", "attached"))[-1]
            tab.send(json.dumps({"type": "user", "content": "are you there?"}))
            refused = frames_until(tab, of_type("error"))[-1]
            # Starting that id again on purpose, with a message, is a new session.
            tab.send(json.dumps(start_message(lab_of(srv), "a fresh start")))
            frames_until(tab, of_type("turn_completed"))
        turns = record(srv, "gone-away")["turns"]
    assert deleted.status_code == 204
    assert notice == {"type": "deleted", "session_id": "gone-away"}
    assert refused["field"] == "session" and "deleted" in refused["message"]
    assert [turn["user_message"] for turn in turns] == ["a fresh start"]


def test_a_deletion_by_another_process_is_noticed_before_a_turn_runs(
    settings: LabSettings, lab_home: Path
) -> None:
    with served(settings) as srv:
        url = srv.ws_url + "/ws/sessions/elsewhere"
        one_closed_turn(srv, "elsewhere")
        with connect(url, proxy=None) as tab:
            tab.send(json.dumps(start_message(lab_of(srv), "")))
            history = frames_until(tab, of_type("history"))[-1]
            # Deleted by the CLI (or another worker): this server sends no frame for it.
            command = [sys.executable, "-m", "agent_lab", "sessions", "delete", "elsewhere"]
            done = subprocess.run(
                [*command, "--yes"], capture_output=True, text=True, timeout=60, check=False
            )
            tab.send(json.dumps({"type": "user", "content": "are you there?"}))
            told = frames_until(tab, of_type("error"))
        gone = httpx.get(srv.base_url + "/api/sessions/elsewhere")
    assert history["record"] is not None
    assert done.returncode == 0, done.stderr
    assert {"type": "deleted", "session_id": "elsewhere"} in told
    assert told[-1]["field"] == "session"
    assert gone.status_code == 404  # not re-created as turn 1


def test_serve_reads_websocket_frames_up_to_the_web_frame_limit() -> None:
    from agent_lab.interfaces.cli import serve
    from agent_lab.interfaces.web import limits

    assert serve.MAX_FRAME_BYTES == limits.MAX_FRAME_BYTES
