"""The session stream carries each turn's record as it grows (``turn_record`` frames):
the arguments the event agent resolved appear as soon as its answer is audited, and the
last frame of a turn is the record the store gives back when the session is reopened."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.record.effect_lab import (
    batch_answer,
    blocking_registry,
    crash_mid_batch,
    effect_settings,
)
from tests.record.record_support import answer
from tests.web.web_support import in_process, messages_of, receive_until, start_message

WS = "ws://127.0.0.1/ws/sessions/"
PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)


def _records(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == "turn_record"]


def test_the_stream_carries_the_growing_record_and_ends_with_the_stored_one(
    settings: LabSettings,
) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "rec") as ws:
            ws.send_json(start_message(lab, PROMPT, mode="dual_agent"))
            messages = messages_of(receive_until(ws, "turn_completed"))
        stored = client.get("/api/sessions/rec/records").json()["records"]
        history = client.get("/api/sessions/rec").json()

    frames = _records(messages)
    assert frames and all(frame["turn_index"] == 1 for frame in frames)
    assert frames[-1]["record"] == stored[0] == history["records"][0]
    assert frames[-1]["record"]["status"] == "completed"
    kinds = [m["type"] if m["type"] != "audit" else m["event"] for m in messages]
    resolved = kinds.index("event_agent_response")
    # The very next frame after the event agent's answer: its resolved arguments.
    assert messages[resolved + 1]["type"] == "turn_record"
    events = {e["event_name"]: e for e in messages[resolved + 1]["record"]["events"]}
    calendar = events["calendar.schedule.create"]
    assert calendar["resolved_by"] == "argument_generation"
    assert "start_at" in calendar["arguments"]
    assert resolved < kinds.index("event_batch_results") < kinds.index("turn_completed")
    before = [f for f in frames if messages.index(f) < resolved]
    assert all(e["arguments"] is None for f in before for e in f["record"]["events"]), (
        "no arguments before the event agent resolved them"
    )
    assert history["unreported_calls"] == []


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_a_turn_left_open_by_a_killed_process_is_sent_closed_as_interrupted_when_the_next_starts(
    tmp_path: Path, mode: str
) -> None:
    with SSETranscriptServer() as model:
        model.add(batch_answer(mode), answer("The door may be locked; shall I check?"))
        settings = effect_settings(tmp_path / "home", model.base_url, mode)
        settings.lab_home().mkdir(parents=True, exist_ok=True)
        crash_mid_batch(settings.database(), model.base_url, mode, "crashed")
        registry = blocking_registry(threading.Event())
        with in_process(settings, registry=registry) as (client, lab, _):
            with client.websocket_connect(WS + "crashed") as ws:
                ws.send_json(start_message(lab, "Did it work?", mode=mode))
                messages = messages_of(receive_until(ws, "turn_completed"))
            stored = client.get("/api/sessions/crashed/records").json()["records"]

    kinds = [m["type"] if m["type"] != "audit" else m["event"] for m in messages]
    first = [m for m in _records(messages) if m["turn_index"] == 1]
    assert len(first) == 1, "turn 1's record is sent once, when turn 2 closes it"
    record = first[0]["record"]
    assert record["status"] == "failed"
    assert record["failure"]["reason"] == "interrupted"
    assert record == stored[0], "the live frame is the record the store gives back"
    sent_at = messages.index(first[0])
    assert kinds.index("turn_started") < sent_at < kinds.index("message_delta"), (
        "sent as soon as turn 2 starts, not once it ends"
    )
