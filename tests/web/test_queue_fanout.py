"""What every client of a session is told about turns that will not run, and what a
client that was waiting for its first message gets when it starts the runtime, over a
real uvicorn server:

* queued turns dropped by another client (``drop_queued``, ``close``) reach every client
  as one ``dropped`` frame naming them (``requested`` only on the asking one's);
* a turn queued behind one that ends the session (``session.terminate``) is reported as
  ``dropped`` (``reason: session_ended``) before ``detached``;
* a client holding a stored session "ready to continue" gets a fresh ``history`` when
  its message starts the runtime, with the turns another process added meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_holder import HOLDER_MESSAGE, Holder, holder_answers
from tests.web.test_hardening import frames_until, of_type, slow_settings, started_turn
from tests.web.web_support import ServedLab, kind_of, lab_settings, served, start_message

QUEUED = ["Then set it to 30", "And to 40"]


def lab_of(srv: ServedLab) -> Any:
    assert srv.lab is not None
    return srv.lab


def send(ws: Connection, frame: dict[str, Any]) -> None:
    ws.send(json.dumps(frame))


def stored_turns(srv: ServedLab, session_id: str) -> list[str]:
    record = httpx.get(f"{srv.base_url}/api/sessions/{session_id}").json()
    return [turn["user_message"] for turn in record["records"]]


def queue_behind_a_turn(srv: ServedLab, a: Connection, b: Connection) -> None:
    """``a`` runs a turn and queues ``QUEUED`` behind it; ``b`` watches the session."""
    send(a, start_message(lab_of(srv), "Search for sqlite wal and set the volume to 20"))
    frames_until(a, started_turn)
    send(b, {"type": "start", "resume_from": None})
    frames_until(b, of_type("attached"))
    for text in QUEUED:
        send(a, {"type": "user", "content": text})
    frames_until(a, lambda m: m.get("type") == "queued" and m["count"] == len(QUEUED))


@pytest.mark.parametrize("command", ["drop_queued", "close"])
def test_turns_another_client_drops_are_told_to_every_client(lab_home: Path, command: str) -> None:
    with served(slow_settings(lab_home)) as srv:
        url = srv.ws_url + f"/ws/sessions/fan-{command}"
        with connect(url, proxy=None) as a, connect(url, proxy=None) as b:
            queue_behind_a_turn(srv, a, b)
            send(b, {"type": command})
            asked = frames_until(b, of_type("dropped"))[-1]
            told = frames_until(a, of_type("dropped"))[-1]
            frames_until(a, of_type("turn_completed", "error"))
        turns = stored_turns(srv, f"fan-{command}")

    assert told == {"type": "dropped", "count": 2, "contents": QUEUED, "reason": command}
    assert asked == {**told, "requested": True}
    assert turns == ["Search for sqlite wal and set the volume to 20"]


def test_a_turn_queued_behind_a_terminating_turn_is_reported_dropped(lab_home: Path) -> None:
    with served(lab_settings(lab_home, simulated_ttft_ms=300)) as srv:
        with connect(srv.ws_url + "/ws/sessions/bye", proxy=None) as ws:
            send(ws, start_message(lab_of(srv), "That's all, goodbye!"))
            frames_until(ws, started_turn)
            send(ws, {"type": "user", "content": "Wait, set the volume to 10 first."})
            frames = frames_until(ws, of_type("detached"), timeout=60)
        turns = stored_turns(srv, "bye")

    kinds = [frame["type"] for frame in frames]
    assert "user_message" not in kinds  # it never ran
    dropped = next(frame for frame in frames if frame["type"] == "dropped")
    assert dropped == {
        "type": "dropped",
        "count": 1,
        "contents": ["Wait, set the volume to 10 first."],
        "reason": "session_ended",
    }
    assert kinds.index("dropped") == len(kinds) - 2  # just before `detached`
    assert turns == ["That's all, goodbye!"]


@pytest.fixture
def model() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer(*holder_answers()) as server:
        yield server


def test_a_waiting_client_gets_the_turns_another_process_added_when_it_starts(
    tmp_path: Path, model: SSETranscriptServer
) -> None:
    settings: LabSettings = lab_settings(tmp_path / "home")
    with served(settings) as srv, connect(srv.ws_url + "/ws/sessions/gap", proxy=None) as ws:
        send(ws, start_message(lab_of(srv)))  # "ready to continue": nothing stored yet
        opened = [json.loads(ws.recv(timeout=30)) for _ in range(2)]
        with Holder(settings.database(), model.base_url, "gap") as holder:
            holder.release()  # another process ran turn 1 and left
        send(ws, {"type": "user", "content": "Set the volume to 60"})
        frames = frames_until(ws, of_type("turn_completed", "error"), timeout=60)
        raw_history = next(f for f in frames if f["type"] == "history")

    assert [kind_of(frame) for frame in opened] == ["attached", "history"]
    assert opened[1]["record"] is None
    kinds = [frame["type"] for frame in frames]
    assert kinds[:2] == ["attached", "history"]  # before any of the new turn
    assert kinds.index("history") < kinds.index("user_message")
    shown = [(t["turn_index"], t["user_message"]) for t in raw_history["record"]["records"]]
    assert shown == [(1, HOLDER_MESSAGE)]
    user = next(frame for frame in frames if frame["type"] == "user_message")
    assert user["turn_index"] == 2
