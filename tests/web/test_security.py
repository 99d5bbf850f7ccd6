"""Access control and secrecy: bearer token, Host and Origin checks, API keys never kept."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.testclient import WebSocketTestSession
from starlette.websockets import WebSocketDisconnect

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.web_support import in_process, receive_until, start_message, token_protocol

WS = "ws://127.0.0.1/ws/sessions/"
TOKEN = "lab-token-4b1d"
SECRET = "sk-web-SECRET-7c2e9a41d0"


def test_rest_needs_the_bearer_token(settings: LabSettings) -> None:
    with in_process(settings, token=TOKEN) as (client, _, _):
        paths = ["/api/health", "/api/tools", "/api/defaults", "/api/sessions", "/api/sessions/x"]
        missing = [client.get(path) for path in paths]
        wrong = client.get("/api/health", headers={"Authorization": "Bearer nope"})
        delete = client.delete("/api/sessions/x")
        right = client.get("/api/health", headers={"Authorization": f"Bearer {TOKEN}"})
        page = client.get("/")
    assert all(response.status_code == 401 for response in [*missing, wrong, delete])
    assert missing[0].headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200
    assert page.status_code == 200


def test_socket_needs_the_token_in_its_protocol_header_never_in_the_url(
    settings: LabSettings,
) -> None:
    with in_process(settings, token=TOKEN) as (client, lab, _):
        for url in (WS + "t", WS + "t?token=wrong", WS + f"t?token={TOKEN}"):
            with pytest.raises(WebSocketDisconnect) as refused, client.websocket_connect(url) as ws:
                ws.receive_json()
            assert refused.value.code == 4401
        protocols = ["agent-lab", token_protocol(TOKEN)]
        with client.websocket_connect(WS + "t", subprotocols=protocols) as ws:
            ws.send_json(start_message(lab, "hello"))
            frames = receive_until(ws, "turn_completed")
    assert frames[0]["type"] == "attached"


def test_foreign_host_is_refused_without_a_token(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        evil = client.get("/api/health", headers={"host": "rebound.evil.example"})
        local = client.get("/api/health", headers={"host": "localhost:8000"})
    assert evil.status_code == 400
    assert local.status_code == 200


def test_any_host_is_accepted_with_a_token(settings: LabSettings) -> None:
    with in_process(settings, token=TOKEN) as (client, _, _):
        headers = {"host": "lab.internal:8000", "Authorization": f"Bearer {TOKEN}"}
        response = client.get("/api/health", headers=headers)
    assert response.status_code == 200


def test_cross_origin_socket_is_refused(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        with pytest.raises(WebSocketDisconnect) as refused:
            headers = {"origin": "http://evil.example"}
            with client.websocket_connect(WS + "o", headers=headers) as ws:
                ws.receive_json()
        same = {"origin": "http://127.0.0.1"}
        with client.websocket_connect(WS + "o", headers=same) as ws:
            ws.send_json(start_message(lab, "hello"))
            assert ws.receive_json()["type"] == "attached"
    assert refused.value.code == 4403


def collect_text(ws: WebSocketTestSession, until: str) -> list[str]:
    texts: list[str] = []
    while True:
        text = ws.receive_text()
        texts.append(text)
        if f'"type":"{until}"' in text:
            return texts


def every_file_byte(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def test_an_api_key_from_the_page_is_never_kept_or_sent_back(
    settings: LabSettings, lab_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echoing = {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    provider = SSETranscriptServer(
        ScriptedResponse.sse(
            {"choices": [{"index": 0, "delta": {"content": "Hi!"}, "finish_reason": "stop"}]}
        ),
        fallback=ScriptedResponse.error(401, echoing),
    )
    frames: list[str] = []
    with provider, in_process(settings) as (client, lab, _):
        simulated = {"base_url": lab.base_url, "api_key": SECRET}
        with client.websocket_connect(WS + "key-sim") as ws:
            ws.send_json(start_message(lab, "Search for sqlite wal", connection=simulated))
            frames += collect_text(ws, "turn_completed")
        scripted = {"base_url": provider.base_url, "api_key": SECRET}
        with client.websocket_connect(WS + "key-remote") as ws:
            ws.send_json(start_message(lab, "hello", connection=scripted))
            frames += collect_text(ws, "turn_completed")
            ws.send_json({"type": "user", "content": "again"})
            frames += collect_text(ws, "error")
        with client.websocket_connect(WS + "key-invalid") as ws:
            bad = {"base_url": provider.base_url, "api_key": [SECRET]}
            ws.send_json(start_message(lab, "hello", connection=bad))
            frames.append(ws.receive_text())
        rest = [
            client.get(path).text
            for path in (
                "/api/sessions",
                "/api/sessions/key-sim",
                "/api/sessions/key-remote",
                "/api/sessions/key-remote/export?format=jsonl",
            )
        ]
        stored = every_file_byte(lab_home)
    sent = provider.requests[0].headers["authorization"]
    assert sent == f"Bearer {SECRET}"
    assert any('"type":"error"' in frame and "401" in frame for frame in frames)
    assert "invalid message" in frames[-1]
    assert all(SECRET not in frame for frame in frames)
    assert all(SECRET not in text for text in rest)
    assert SECRET.encode() not in stored
    assert all(SECRET not in record.getMessage() for record in caplog.records)
    assert SECRET not in caplog.text
