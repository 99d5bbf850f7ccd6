"""The SSE transcript server test double: real HTTP, scripted answers, recorded requests."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from agent_lab.testing.sse_server import Pause, ScriptedResponse, SSETranscriptServer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sse"


def test_streams_chunks_and_records_requests_in_a_sync_test() -> None:
    response = ScriptedResponse.sse({"a": 1}, "raw", b"bytes")
    with SSETranscriptServer(response) as server, httpx.Client() as http:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        answer = http.post(
            f"{server.base_url}/chat/completions", json={"x": [1]}, headers={"X-Probe": "yes"}
        )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    assert answer.text == 'data: {"a":1}\n\ndata: raw\n\ndata: bytes\n\ndata: [DONE]\n\n'
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.json() == {"x": [1]}
    assert request.headers["x-probe"] == "yes"


def test_error_answers_and_the_fallback_once_the_script_is_used_up() -> None:
    with (
        SSETranscriptServer(
            ScriptedResponse.error(
                429, {"error": {"message": "slow down"}}, headers={"Retry-After": "3"}
            )
        ) as server,
        httpx.Client() as http,
    ):
        first = http.post(server.base_url + "/chat/completions", json={})
        second = http.post(server.base_url + "/chat/completions", json={})
    assert first.status_code == 429 and first.headers["retry-after"] == "3"
    assert first.json() == {"error": {"message": "slow down"}}
    assert second.status_code == 500
    assert "no scripted response left" in second.text
    assert server.request_count == 2


def test_requests_on_one_keep_alive_connection_and_added_responses() -> None:
    server = SSETranscriptServer(ScriptedResponse.sse("one"), fallback=ScriptedResponse.sse("fb"))
    server.add(ScriptedResponse.sse("two"))
    with server, httpx.Client() as http:
        texts = [http.post(server.base_url, content=b"x").text for _ in range(3)]
    assert texts == [f"data: {t}\n\ndata: [DONE]\n\n" for t in ("one", "two", "fb")]
    assert [request.body for request in server.requests] == [b"x"] * 3


def test_pauses_and_line_endings() -> None:
    response = ScriptedResponse.sse("a", "b", pause=0.2, line_ending="\r\n", done=False)
    with SSETranscriptServer(response) as server, httpx.Client() as http:
        started = time.monotonic()
        text = http.get(server.base_url).text
    assert time.monotonic() - started >= 0.2
    assert text == "data: a\r\n\r\ndata: b\r\n\r\n"


def test_abort_drops_the_connection_mid_body() -> None:
    response = ScriptedResponse.sse("a", done=False, abort=True)
    with (
        SSETranscriptServer(response) as server,
        httpx.Client() as http,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        http.get(server.base_url).read()


def test_fixtures_load_and_split() -> None:
    recorded = ScriptedResponse.from_fixture(FIXTURES / "openai" / "text_cached_usage.json")
    data = b"".join(chunk for chunk in recorded.chunks if isinstance(chunk, bytes))
    assert data.startswith(b"data: {") and data.endswith(b"data: [DONE]\n\n")
    pieces = recorded.split(3).chunks
    assert all(isinstance(piece, bytes) and len(piece) <= 3 for piece in pieces)
    assert b"".join(p for p in pieces if isinstance(p, bytes)) == data
    with SSETranscriptServer(recorded.split(3)) as server, httpx.Client() as http:
        assert http.get(server.base_url).content == data


def test_stop_does_not_wait_for_a_hanging_answer() -> None:
    # The answer hangs for ten minutes; stop() gives its thread ten seconds to end.
    server = SSETranscriptServer(ScriptedResponse(chunks=(b"data: a\n\n", Pause(600))))
    before = set(threading.enumerate())
    server.start()
    serving = [thread for thread in threading.enumerate() if thread not in before]
    with httpx.Client(timeout=0.3) as http, pytest.raises(httpx.ReadTimeout):
        http.get(server.base_url).read()
    server.stop()
    assert serving and not any(thread.is_alive() for thread in serving)


@pytest.mark.asyncio
async def test_async_context_manager() -> None:
    async with (
        SSETranscriptServer(ScriptedResponse.sse("x")) as server,
        httpx.AsyncClient() as http,
    ):
        answer = await http.post(server.base_url, json={"q": 1})
    assert answer.text.startswith("data: x")
    assert server.requests[0].json() == {"q": 1}


def _leave_with_idle_connections() -> None:
    """Leaves ``with`` while one connection sits idle after an answer and one never spoke."""
    silent, http = socket.socket(), httpx.Client()
    try:
        with SSETranscriptServer(ScriptedResponse.sse("x")) as server:
            silent.connect(("127.0.0.1", server.port))
            assert http.post(server.base_url, content=b"{}").text.startswith("data: x")
    finally:  # both connections were still open when the server stopped
        http.close()
        silent.close()


def test_stop_with_idle_client_connections_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    _leave_with_idle_connections()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_stop_with_idle_client_connections_prints_nothing_on_stderr() -> None:
    script = (
        "from tests.infrastructure.test_sse_server import _leave_with_idle_connections as go; go()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
