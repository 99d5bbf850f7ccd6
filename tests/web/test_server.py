"""The web lab behind a real uvicorn server on 127.0.0.1 (ephemeral port)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import CLOSE_SLOW_CONSUMER, WebOptions
from tests.web.web_support import ServedLab, lab_settings, served, start_message


def read_until(ws: Connection, kind: str, timeout: float = 20) -> list[dict[str, Any]]:
    frames = []
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        frames.append(frame)
        message = frame["message"] if "offset" in frame else frame
        assert message.get("type") != "error" or kind == "error", message
        if message.get("type") == kind:
            return frames


def request_for(srv: ServedLab, text: str, **extra: Any) -> str:
    assert srv.lab is not None
    return json.dumps(start_message(srv.lab, text, **extra))


def test_rest_and_page_over_http(settings: LabSettings) -> None:
    with served(settings) as srv:
        health = httpx.get(srv.base_url + "/api/health").json()
        page = httpx.get(srv.base_url + "/")
        tools = httpx.get(srv.base_url + "/api/tools").json()["tools"]
    assert health["status"] == "ok"
    assert page.status_code == 200 and "Agent Lab" in page.text
    assert {tool["name"] for tool in tools} >= {"handoff_note", "session.terminate"}


def test_a_turn_over_a_real_websocket(settings: LabSettings) -> None:
    with served(settings) as srv:
        with connect(srv.ws_url + "/ws/sessions/real", proxy=None) as ws:
            ws.send(request_for(srv, "Search for sqlite wal and set the volume to 20"))
            frames = read_until(ws, "turn_completed")
        detail = httpx.get(srv.base_url + "/api/sessions/real").json()
    kinds = {frame["message"]["type"] for frame in frames if "message" in frame}
    assert {"message_delta", "event", "tool_result", "round_stats"} <= kinds
    assert detail["live"] is True and detail["usage"]["tool_count"] == 2


def test_token_protects_http_and_socket(settings: LabSettings) -> None:
    with served(settings, token="tok") as srv:
        denied = httpx.get(srv.base_url + "/api/sessions")
        allowed = httpx.get(srv.base_url + "/api/sessions", headers={"Authorization": "Bearer tok"})
        url = srv.ws_url + "/ws/sessions/x"
        with connect(url, proxy=None) as ws, pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert denied.status_code == 401 and allowed.status_code == 200
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


def test_dropped_client_reconnects_and_resumes(lab_home: Path) -> None:
    slow = lab_settings(lab_home, simulated_ttft_ms=20, simulated_tokens_per_second=150)
    with served(slow) as srv:
        url = srv.ws_url + "/ws/sessions/resume"
        with connect(url, proxy=None) as ws:
            ws.send(request_for(srv, "Search for sqlite wal and set the volume to 20"))
            before = read_until(ws, "message_delta")
            ws.socket.shutdown(socket.SHUT_RDWR)  # the network goes away, no closing handshake
        last = before[-1]["offset"]
        with connect(url, proxy=None) as again:
            again.send(json.dumps({"type": "start", "resume_from": last}))
            after = read_until(again, "turn_completed")
    got = [frame["offset"] for frame in after if "offset" in frame]
    assert after[0]["resumed"] is True
    assert got == list(range(last + 1, last + 1 + len(got)))


@pytest.mark.asyncio
async def test_concurrent_sessions_on_one_server(lab_home: Path) -> None:
    settings = lab_settings(lab_home, simulated_ttft_ms=30, simulated_tokens_per_second=300)
    with served(settings) as srv:
        request = start_message(_open_lab(srv), "Search for sqlite wal and set the volume to 20")

        async def one(index: int) -> dict[str, Any]:
            url = f"{srv.ws_url}/ws/sessions/many-{index}"
            async with async_connect(url, proxy=None) as ws:
                await ws.send(json.dumps(request))
                while True:
                    frame = json.loads(await ws.recv())
                    if frame.get("message", {}).get("type") == "turn_completed":
                        return dict(frame["message"])

        completed = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(10))), 60)
        async with httpx.AsyncClient(base_url=srv.base_url) as client:
            listed = (await client.get("/api/sessions")).json()["sessions"]
    assert [message["turn_index"] for message in completed] == [1] * 10
    assert sorted(session["id"] for session in listed) == sorted(f"many-{i}" for i in range(10))


def _open_lab(srv: ServedLab) -> Lab:
    assert srv.lab is not None
    return srv.lab


def subscriber_count(srv: ServedLab, session_id: str) -> int:
    async def count() -> int:
        hub = srv.server.config.app.state.web.hub  # type: ignore[union-attr]
        live = hub.get(session_id)
        return -1 if live is None else int(live.subscriber_count)

    return int(srv.call(count()))


def stalled_client(url: str) -> Connection:
    """A client that reads nothing: a tiny receive window and a one-frame queue."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    return connect(url, sock=sock, max_queue=1, compression=None, proxy=None)


def test_a_slow_browser_is_dropped_and_stalls_nobody(settings: LabSettings) -> None:
    with served(settings, options=WebOptions(send_buffer=64)) as srv:
        url = srv.ws_url + "/ws/sessions/shared"
        with stalled_client(url) as stalled:
            stalled.send(request_for(srv, "Search for sqlite wal"))
            wait_for(lambda: subscriber_count(srv, "shared") == 1)
            with connect(url, proxy=None, max_queue=4096, max_size=None) as fast:
                fast.send(json.dumps({"type": "start", "resume_from": None}))
                first_turn_ended(fast)
                # Each turn of the fast client completes while the stalled one lags behind
                # (read_until fails if a turn never completes).
                for index in range(60):
                    text = f"Search for wal mode {index} " + "and more context " * 300
                    fast.send(json.dumps({"type": "user", "content": text}))
                    read_until(fast, "turn_completed", timeout=60)
                    if subscriber_count(srv, "shared") == 1:
                        break
                assert subscriber_count(srv, "shared") == 1, "the stalled client was never dropped"
                with connect(srv.ws_url + "/ws/sessions/other", proxy=None) as other:
                    other.send(request_for(srv, "Set the volume to 20"))
                    read_until(other, "turn_completed", timeout=60)
            seen, code = drain(stalled)
            assert code == CLOSE_SLOW_CONSUMER
            with connect(url, proxy=None, max_size=None) as back:
                back.send(json.dumps({"type": "start", "resume_from": seen[-1]}))
                attached = json.loads(back.recv(timeout=10))
                missed = _missed(attached, seen)
                replayed = [json.loads(back.recv(timeout=10))["offset"] for _ in missed]
    assert attached["live"] is True and attached["resumed"] is True
    assert replayed == list(range(seen[-1] + 1, attached["next_offset"]))


def first_turn_ended(ws: Connection) -> None:
    """Wait for the first turn of a session just attached to: it ends live (its
    ``turn_completed`` frame) or had ended already (the ``history`` frame holds it)."""
    history = read_until(ws, "history")[-1]
    if history["record"] is None or not history["record"]["records"]:
        read_until(ws, "turn_completed")


def _missed(attached: dict[str, Any], seen: list[int]) -> range:
    return range(seen[-1] + 1, attached["next_offset"])


def wait_for(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.02)


def drain(ws: Connection) -> tuple[list[int], int | None]:
    """Read as a browser that came back does: with a normal receive window (the tiny
    one of ``stalled_client`` would trickle the backlog in by zero-window probes)."""
    ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    offsets = []
    try:
        while True:
            frame = json.loads(ws.recv(timeout=10))
            if "offset" in frame:
                offsets.append(frame["offset"])
    except ConnectionClosed as closed:
        return offsets, closed.rcvd.code if closed.rcvd is not None else None
