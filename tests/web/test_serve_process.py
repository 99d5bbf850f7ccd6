"""The web lab as ``agent-lab serve`` runs it, in its own process: the token travels in
the subprotocol header, and an oversized start is answered with an error naming the field
(not a closed socket), as uvicorn is configured by the command itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from tests.cli.cli_helpers import wait_for_lab_url
from tests.web.web_support import token_protocol

TOKEN = "serve-process-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def lab_url(lab_home: Path) -> Iterator[str]:
    """``agent-lab serve --port 0 --token …`` on the simulated model, until the test ends."""
    env = {**os.environ, "AGENT_LAB_HOME": str(lab_home), "NO_COLOR": "1"}
    env.pop("OPENAI_BASE_URL", None)
    command = [sys.executable, "-m", "agent_lab", "serve", "--port", "0", "--token", TOKEN]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        yield wait_for_lab_url(process)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.communicate()


def protocols() -> list[Subprotocol]:
    return [Subprotocol("agent-lab"), Subprotocol(token_protocol(TOKEN))]


def start(url: str, text: str, **request_changes: Any) -> dict[str, Any]:
    request = httpx.get(url + "/api/defaults", headers=AUTH, trust_env=False).json()["request"]
    request.pop("session_id", None)
    request.update(user_message=text, **request_changes)
    return {"type": "start", "request": request, "resume_from": None}


def test_a_ten_megabyte_prompt_gets_an_error_naming_its_field(lab_url: str) -> None:
    huge = start(lab_url, "hello", system_prompts=["x" * 10_000_000])
    ws_url = lab_url.replace("http://", "ws://") + "/ws/sessions/huge"
    with connect(ws_url, proxy=None, subprotocols=protocols(), max_size=None) as ws:
        ws.send(json.dumps(huge))
        error = json.loads(ws.recv(timeout=60))
        ws.send(json.dumps(start(lab_url, "hello")))  # the same socket goes on
        attached = json.loads(ws.recv(timeout=60))
        chosen = ws.subprotocol
    sessions = httpx.get(lab_url + "/api/sessions", headers=AUTH, trust_env=False).json()
    assert error["type"] == "error" and error["field"] == "request.system_prompts.0"
    assert "request.system_prompts.0: longer than 50000 characters" in error["message"]
    assert len(error["message"]) < 300
    assert attached["type"] == "attached" and chosen == "agent-lab"
    assert [session["id"] for session in sessions["sessions"]] == ["huge"]
