"""Credentials typed into the page's endpoint (``user:pass@``) stay out of everything the
web lab shows or stores, in the form the provider really received them: a real uvicorn
server, a real provider on 127.0.0.1 that echoes its request back, the lab's SQLite file."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from tests.infrastructure.echo_provider import EchoProvider
from tests.web.test_hardening import frames_until
from tests.web.web_support import TERMINAL, ServedLab, lab_settings, served, start_message

PASSWORD = "WEBurlpass-4k9"
TOKEN = base64.b64encode(f"webuser:{PASSWORD}".encode()).decode()
SECRETS = (TOKEN.rstrip("="), f"webuser:{PASSWORD}", PASSWORD)


def _frames(ws: Connection) -> list[dict[str, Any]]:
    """Messages (stream frames unwrapped) until the turn completes or fails."""
    return frames_until(ws, lambda message: message.get("type") in TERMINAL, timeout=30)


def _leaked(text: str, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    return [secret for secret in secrets if secret.lower() in text.lower()]


def _start(srv: ServedLab, connection: dict[str, str]) -> dict[str, Any]:
    assert srv.lab is not None
    return start_message(srv.lab, "hi", connection=connection)


def test_page_url_credentials_echoed_by_the_provider_are_masked_everywhere(
    lab_home: Path,
) -> None:
    with EchoProvider() as provider, served(lab_settings(lab_home, max_retries=0)) as srv:
        url = provider.root.replace("http://", f"http://webuser:{PASSWORD}@") + "/stream/v1"
        with connect(f"{srv.ws_url}/ws/sessions/echoed", proxy=None) as ws:
            ws.send(json.dumps(_start(srv, {"base_url": url})))
            frames = _frames(ws)
        shown = httpx.get(f"{srv.base_url}/api/sessions/echoed").text
        exported = httpx.get(f"{srv.base_url}/api/sessions/echoed/export").text
        received = provider.requests
    assert received[0].headers["authorization"] == f"Basic {TOKEN}"
    assert frames[-1]["type"] == "turn_completed", frames[-1]
    for text in (json.dumps(frames), shown, exported):
        assert "auth=***" in text  # the echo arrived, masked
        assert not _leaked(text), text
    stored = {p.name: p.read_bytes() for p in lab_home.rglob("*.sqlite3*")}
    assert stored
    for name, data in stored.items():  # the database and its WAL
        assert not _leaked(data.decode("latin-1")), name


def test_a_key_typed_next_to_url_credentials_is_refused_showing_neither(
    lab_home: Path,
) -> None:
    key = "sk-typed-WEBKEY-1"
    with EchoProvider() as provider, served(lab_settings(lab_home)) as srv:
        url = provider.root.replace("http://", f"http://webuser:{PASSWORD}@") + "/stream/v1"
        with connect(f"{srv.ws_url}/ws/sessions/both", proxy=None) as ws:
            ws.send(json.dumps(_start(srv, {"base_url": url, "api_key": key})))
            frames = _frames(ws)
        assert provider.requests == []
    error = frames[-1]
    assert error["type"] == "error", error
    assert "carries credentials (user:pass@) and an API key is given too" in error["message"]
    assert not _leaked(json.dumps(frames), (*SECRETS, key, "webuser")), error
