"""A session another runtime drives (another process on the same SQLite store), over a
real uvicorn server: a start the claim refuses is answered as a refusal — one error
frame ``failure_reason: session_busy`` naming the holder, then the session as stored
(the other runtime's turn still running) — never as ``attached`` and a turn's end;
nothing of it is stored, and the same message goes through once the holder is done."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_fixtures import model, settings
from tests.web.busy_holder import HOLDER_MESSAGE, Holder
from tests.web.web_support import ServedLab, kind_of, served, start_message

__all__ = ["model", "settings"]
TYPED = "Set the volume to 70"
SESSION = "held"


def receive(ws: Connection) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return frame


def until(ws: Connection, kind: str) -> list[dict[str, Any]]:
    frames = [receive(ws)]
    while kind_of(frames[-1]) != kind:
        frames.append(receive(ws))
    return frames


def ask(srv: ServedLab, ws: Connection, path: str) -> None:
    """Ask for a runtime with ``TYPED``: a ``start`` carrying it, or (``first_user``) a
    ``start`` without a message (answered at once) and then a ``user`` message."""
    assert srv.lab is not None
    if path == "start":
        ws.send(json.dumps(start_message(srv.lab, TYPED)))
        return
    ws.send(json.dumps(start_message(srv.lab)))
    assert [kind_of(frame) for frame in (receive(ws), receive(ws))] == ["attached", "history"]
    ws.send(json.dumps({"type": "user", "content": TYPED}))


def turns(srv: ServedLab) -> list[tuple[int, str, str]]:
    record = httpx.get(f"{srv.base_url}/api/sessions/{SESSION}").json()
    return [(t["turn_index"], t["user_message"], t["status"]) for t in record["records"]]


@pytest.mark.parametrize("path", ["start", "first_user"])
def test_a_start_the_claim_refuses_is_an_error_frame_not_a_turns_end(
    settings: LabSettings, model: SSETranscriptServer, path: str
) -> None:
    with served(settings) as srv, Holder(settings.database(), model.base_url, SESSION) as holder:
        with connect(f"{srv.ws_url}/ws/sessions/{SESSION}", proxy=None) as ws:
            ask(srv, ws, path)
            error, history = receive(ws), receive(ws)
            ws.send(json.dumps({"type": "cancel"}))
            after = receive(ws)  # nothing else came: no attached, no stream, no detached
            assert turns(srv) == [(1, HOLDER_MESSAGE, "running")]  # nothing of it stored

            holder.release()
            assert srv.lab is not None
            again = {"type": "user", "content": TYPED}  # "Send" once more
            ws.send(json.dumps(start_message(srv.lab, TYPED) if path == "start" else again))
            retried = until(ws, "turn_completed")
        stored = turns(srv)

    assert set(error) == {"type", "message", "failure_reason", "exit_class"}
    assert (error["failure_reason"], error["exit_class"]) == ("session_busy", "usage")
    assert "is being driven by another runtime" in error["message"]
    assert f"pid {holder.pid}" in error["message"]  # it names the holder
    assert history["type"] == "history"
    held = [(t["turn_index"], t["status"]) for t in history["record"]["records"]]
    assert held == [(1, "running")]  # the other runtime's turn, as it is
    assert after == {"type": "cancelled", "accepted": False}

    assert retried[0]["type"] == "attached" and retried[0]["live"] is True
    user = next(f["message"] for f in retried if kind_of(f) == "user_message")
    assert user == {"type": "user_message", "turn_index": 2, "content": TYPED}
    assert stored == [(1, HOLDER_MESSAGE, "completed"), (2, TYPED, "completed")]


def opening(srv: ServedLab) -> bool:
    """The hub holds a runtime for ``SESSION`` (it may still wait for the claim)."""
    live: bool = httpx.get(f"{srv.base_url}/api/sessions/{SESSION}").json()["live"]
    return live


def wait_until_opening(srv: ServedLab) -> None:
    for _ in range(500):
        if opening(srv):
            return
        time.sleep(0.02)
    raise AssertionError("the hub never started a runtime for the session")


def other_session_runs(srv: ServedLab) -> list[dict[str, Any]]:
    """A turn of another session, start to end, while this one waits for its claim."""
    assert srv.lab is not None
    with connect(f"{srv.ws_url}/ws/sessions/other", proxy=None) as ws:
        ws.send(json.dumps(start_message(srv.lab, "Set the volume to 10")))
        return until(ws, "turn_completed")


def test_clients_of_a_session_waiting_for_its_claim_are_answered_once_it_opened(
    settings: LabSettings, model: SSETranscriptServer
) -> None:
    with served(settings) as srv, Holder(settings.database(), model.base_url, SESSION) as holder:
        assert srv.lab is not None
        srv.lab.runtime_options["claim_wait_seconds"] = 60.0  # as `serve --workers` waits
        url = f"{srv.ws_url}/ws/sessions/{SESSION}"
        with connect(url, proxy=None) as starter, connect(url, proxy=None) as joiner:
            starter.send(json.dumps(start_message(srv.lab, TYPED)))
            wait_until_opening(srv)
            joiner.send(json.dumps(start_message(srv.lab)))
            other = other_session_runs(srv)  # the hub goes on meanwhile
            for ws in (starter, joiner):  # neither is told anything before it opened
                with pytest.raises(TimeoutError):
                    ws.recv(timeout=0)
            holder.release()
            started, joined = until(starter, "turn_completed"), until(joiner, "turn_completed")
        stored = turns(srv)

    assert kind_of(other[-1]) == "turn_completed"
    for frames in (started, joined):
        assert frames[0]["type"] == "attached" and frames[0]["live"] is True
        user = next(f["message"] for f in frames if kind_of(f) == "user_message")
        assert user == {"type": "user_message", "turn_index": 2, "content": TYPED}
        assert "error" not in [kind_of(frame) for frame in frames]
    assert stored == [(1, HOLDER_MESSAGE, "completed"), (2, TYPED, "completed")]


def test_a_client_joining_a_start_that_is_then_refused_sees_the_session_not_live(
    settings: LabSettings, model: SSETranscriptServer
) -> None:
    with served(settings) as srv, Holder(settings.database(), model.base_url, SESSION) as holder:
        assert srv.lab is not None
        srv.lab.runtime_options["claim_wait_seconds"] = 2.0  # then it gives up: refused
        url = f"{srv.ws_url}/ws/sessions/{SESSION}"
        with connect(url, proxy=None) as starter, connect(url, proxy=None) as joiner:
            starter.send(json.dumps(start_message(srv.lab, TYPED)))
            wait_until_opening(srv)
            joiner.send(json.dumps(start_message(srv.lab)))
            refusal = [receive(starter), receive(starter)]
            joined = [receive(joiner), receive(joiner)]
            for ws in (starter, joiner):
                ws.send(json.dumps({"type": "cancel"}))
                assert receive(ws) == {"type": "cancelled", "accepted": False}
        holder.release()

    assert [kind_of(frame) for frame in refusal] == ["error", "history"]
    assert refusal[0]["failure_reason"] == "session_busy"
    assert f"pid {holder.pid}" in refusal[0]["message"]
    assert [kind_of(frame) for frame in joined] == ["attached", "history"]
    assert joined[0]["live"] is False  # waiting for its first message, not attached
