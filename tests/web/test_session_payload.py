"""A reopened session's payload grows linearly with its turns: request audits come
without the conversation they repeat, and one turn's audits come in full on demand."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from tests.web.test_rest import WS, run_turns
from tests.web.web_support import in_process, receive_until, start_message

MODES = ["dual_agent", "chat_agent_tools"]
DEFERRED_FIELDS = {
    "chat_agent_request": "messages",
    "event_agent_request": "history",
    "chat_agent_response": "raw_chunks",
}
"""The bulky field of each audit that only a bar's detail shows."""


def texts(count: int, start: int = 0) -> list[str]:
    return [
        f"turn {i}: search for sqlite wal and set the volume to {i}"
        if i % 3 == 0
        else f"turn {i}: set the volume to {i}"
        for i in range(start, start + count)
    ]


def continue_turns(client: TestClient, lab: Lab, session_id: str, batch: list[str]) -> None:
    """More turns on the stored session, in a new runtime."""
    with client.websocket_connect(WS + session_id) as ws:
        ws.send_json(start_message(lab))
        receive_until(ws, "history")
        for text in batch:
            ws.send_json({"type": "user", "content": text})
            receive_until(ws, "turn_completed")
        ws.send_json({"type": "close"})
        receive_until(ws, "detached")


def audit_bytes(client: TestClient, session_id: str) -> int:
    return len(json.dumps(client.get(f"/api/sessions/{session_id}").json()["audit"]))


@pytest.mark.parametrize("mode", MODES)
def test_the_session_trail_grows_linearly_with_its_turns(settings: LabSettings, mode: str) -> None:
    """Turns 11–20 add as much to the trail as turns 1–10 did, or less
    (10 % leeway); a trail that repeats each request's conversation grows faster with
    every turn (here by 12–23 % more in the second ten turns)."""
    with in_process(settings) as (client, lab, _):
        run_turns(client, lab, "long", *texts(10), mode=mode)
        first = audit_bytes(client, "long")
        continue_turns(client, lab, "long", texts(10, start=10))
        second = audit_bytes(client, "long") - first
    assert second < 1.1 * first, (first, second)


def test_one_turns_audits_come_in_full(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app):
        run_turns(client, lab, "full", *texts(3))
        trail = client.get("/api/sessions/full").json()["audit"]
        turn = client.get("/api/sessions/full/audit", params={"turn_index": 3}).json()["audit"]
        stored = app.state.web.store().list_audit_logs("full", turn_index=3)
    assert turn == [{"offset": audit["id"], **audit} for audit in stored]
    deferred = [entry for entry in trail if entry.get("deferred")]
    assert {entry["event"] for entry in deferred} == set(DEFERRED_FIELDS)
    full = {entry["offset"]: entry for entry in turn}
    for entry in (entry for entry in deferred if entry["turn_index"] == 3):
        field = DEFERRED_FIELDS[entry["event"]]
        whole = full[entry["offset"]]["details"]
        assert entry["deferred"] == {field: len(whole[field])} and len(whole[field]) > 1
        assert entry["details"] == {k: v for k, v in whole.items() if k != field}
    shipped = [
        {k: v for k, v in e.items() if k != "deferred"} for e in trail if not e.get("deferred")
    ]
    assert all(entry in shipped for entry in turn if entry["event"] not in DEFERRED_FIELDS)


def test_the_history_frame_defers_the_same_fields(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        run_turns(client, lab, "hist", *texts(2))
        rest = client.get("/api/sessions/hist").json()["audit"]
        with client.websocket_connect(WS + "hist") as ws:
            ws.send_json(start_message(lab))
            history = receive_until(ws, "history")[-1]
    assert history["record"]["audit"] == rest
    assert any(entry.get("deferred") for entry in rest)


def test_turn_audits_of_an_unknown_session_are_a_404(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        response = client.get("/api/sessions/nope/audit", params={"turn_index": 1})
        missing = client.get("/api/sessions/nope/audit")
    assert response.status_code == 404 and response.json() == {"detail": "no such session"}
    assert missing.status_code == 422
