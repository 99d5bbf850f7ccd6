"""The session WebSocket, in process: streaming, commands, attach, resume and history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.websockets import WebSocketDisconnect

from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import WebOptions
from tests.web.web_support import (
    in_process,
    kind_of,
    lab_settings,
    messages_of,
    portal_of,
    receive_until,
    start_message,
)

WS = "ws://127.0.0.1/ws/sessions/"


def offsets(frames: list[dict[str, Any]]) -> list[int]:
    return [frame["offset"] for frame in frames if "offset" in frame]


def test_start_streams_the_output_protocol_with_offsets(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _), client.websocket_connect(WS + "s1") as ws:
        ws.send_json(start_message(lab, "Search for sqlite wal and set the volume to 20"))
        frames = receive_until(ws, "turn_completed")
    attached, history = frames[0], frames[1]
    assert attached["type"] == "attached" and attached["live"] is True
    assert attached["session_id"] == "s1" and attached["stream_id"]
    assert history == {"type": "history", "record": None, "before_turn": None}
    stream = frames[2:]
    assert all(set(frame) == {"offset", "message"} for frame in stream)
    assert offsets(stream) == list(range(len(stream)))
    kinds = [frame["message"]["type"] for frame in stream]
    for kind in ("session_started", "user_message", "turn_started", "message_delta", "event"):
        assert kind in kinds
    assert {"tool_result", "round_stats", "audit"} <= set(kinds)
    user = next(m for m in messages_of(stream) if m["type"] == "user_message")
    assert user == {
        "type": "user_message",
        "turn_index": 1,
        "content": "Search for sqlite wal and set the volume to 20",
    }
    assert kinds.index("user_message") < kinds.index("turn_started")


def test_user_turns_continue_the_session(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _), client.websocket_connect(WS + "s2") as ws:
        ws.send_json(start_message(lab, "hello"))
        first = receive_until(ws, "turn_completed")
        ws.send_json({"type": "user", "content": "Set the volume to 40"})
        second = receive_until(ws, "turn_completed")
    assert offsets(second)[0] == offsets(first)[-1] + 1
    completed = messages_of(second)[-1]
    assert completed == {"type": "turn_completed", "turn_index": 2, "round_count": 1}


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("not json", "invalid message"),
        ('{"type": "dance"}', "invalid message"),
        ('{"type": "start", "request": {"chat_agent": {}}}', "request.chat_agent.model"),
        ('{"type": "start", "request": {"chat_agent": {"model": "m"}, "bogus": 1}}', "bogus"),
        ('{"type": "user", "content": "hi"}', "no live session"),
        ('{"type": "start"}', "request: required"),
    ],
)
def test_bad_messages_get_an_error_and_the_socket_stays_usable(
    settings: LabSettings, payload: str, fragment: str
) -> None:
    with in_process(settings) as (client, lab, _), client.websocket_connect(WS + "bad") as ws:
        ws.send_text(payload)
        error = ws.receive_json()
        ws.send_json(start_message(lab, "hello"))
        frames = receive_until(ws, "turn_completed")
    assert error["type"] == "error" and fragment in error["message"]
    assert frames[0]["type"] == "attached"


def test_request_session_id_is_forced_to_the_path(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "path-id") as ws:
            start = start_message(lab, "hello")
            start["request"]["session_id"] = "other-id"
            ws.send_json(start)
            frames = receive_until(ws, "turn_completed")
        ids = [s["id"] for s in client.get("/api/sessions").json()["sessions"]]
    started = next(m for m in messages_of(frames) if m["type"] == "session_started")
    assert started["session_id"] == "path-id"
    assert ids == ["path-id"]


def test_cancel_ends_the_turn_but_not_the_session(lab_home: Path) -> None:
    slow = lab_settings(lab_home, simulated_ttft_ms=50, simulated_tokens_per_second=20)
    with in_process(slow) as (client, lab, _), client.websocket_connect(WS + "c") as ws:
        ws.send_json({"type": "cancel"})
        assert ws.receive_json() == {"type": "cancelled", "accepted": False}
        ws.send_json(start_message(lab, "Tell me a long story about lighthouses and the sea"))
        receive_until(ws, "message_delta")
        ws.send_json({"type": "cancel"})
        frames = receive_until(ws, "error")
        ws.send_json({"type": "user", "content": "hello again"})
        after = receive_until(ws, "turn_completed")
    assert {"type": "cancelled", "accepted": True} in frames
    assert messages_of(frames)[-1]["failure_reason"] == "cancelled"
    assert messages_of(after)[-1]["turn_index"] == 2


def test_second_socket_attaches_to_the_live_session(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app), client.websocket_connect(WS + "a") as one:
        one.send_json(start_message(lab, "Set the volume to 10"))
        receive_until(one, "turn_completed")
        with client.websocket_connect(WS + "a") as two:
            two.send_json(start_message(lab, "this message must not start a runtime"))
            attached, history = two.receive_json(), two.receive_json()
            assert len(app.state.web.hub.live_ids()) == 1
            two.send_json({"type": "user", "content": "Set the volume to 90"})
            seen_by_two = receive_until(two, "turn_completed")
        seen_by_one = receive_until(one, "turn_completed")
    assert attached["live"] is True and attached["resumed"] is False
    assert history["before_turn"] == 2
    stored_users = [m["content"] for m in history["record"]["messages"] if m["role"] == "user"]
    assert stored_users == ["Set the volume to 10"]
    assert offsets(seen_by_one) == offsets(seen_by_two)
    user = messages_of(seen_by_one)[0]
    assert user == {"type": "user_message", "turn_index": 2, "content": "Set the volume to 90"}


def test_reconnect_resumes_after_the_last_offset(lab_home: Path) -> None:
    slow = lab_settings(lab_home, simulated_ttft_ms=20, simulated_tokens_per_second=200)
    with in_process(slow) as (client, lab, _):
        with client.websocket_connect(WS + "r") as ws:
            ws.send_json(start_message(lab, "Search for sqlite wal and set the volume to 20"))
            before = receive_until(ws, "message_delta")
        stream_id = before[0]["stream_id"]
        last = offsets(before)[-1]
        with client.websocket_connect(WS + "r") as ws:
            ws.send_json({"type": "start", "resume_from": last, "stream_id": stream_id})
            after = receive_until(ws, "turn_completed")
    assert after[0]["type"] == "attached" and after[0]["resumed"] is True
    assert kind_of(after[1]) != "history"
    assert offsets(after) == list(range(last + 1, last + 1 + len(offsets(after))))
    kinds = [m["type"] for m in messages_of(before) + messages_of(after)]
    assert kinds.count("user_message") == 1 and kinds.count("round_stats") == 2


def test_session_keeps_running_without_sockets(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app):
        with client.websocket_connect(WS + "orphan") as ws:
            ws.send_json(start_message(lab, "Set the volume to 25"))
            ws.receive_json()
        hub = app.state.web.hub
        live = hub.get("orphan")
        assert live is not None
        portal_of(client).call(_wait_idle, live)
        detail = client.get("/api/sessions/orphan").json()
    assert detail["live"] is True
    assert [turn["status"] for turn in detail["turns"]] == ["completed"]


async def _wait_idle(live: Any) -> None:
    import asyncio

    for _ in range(200):
        if not live.turn_running and live.next_offset > 5:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("turn did not finish")


def test_resume_beyond_the_replay_buffer_falls_back_to_history(settings: LabSettings) -> None:
    options = WebOptions(replay_limit=8)
    with in_process(settings, options=options) as (client, lab, _):
        with client.websocket_connect(WS + "small") as ws:
            ws.send_json(start_message(lab, "Search for sqlite wal"))
            first = receive_until(ws, "turn_completed")
            ws.send_json({"type": "user", "content": "thanks"})
            receive_until(ws, "turn_completed")
        with client.websocket_connect(WS + "small") as ws:
            ws.send_json({"type": "start", "resume_from": offsets(first)[3]})
            attached, history = ws.receive_json(), ws.receive_json()
    assert attached["resumed"] is False
    assert history["type"] == "history" and history["before_turn"] == 3
    turns = {m["turn_index"] for m in history["record"]["messages"]}
    assert turns == {1, 2}


def test_foreign_stream_id_gets_history(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "f") as ws:
            ws.send_json(start_message(lab, "hello"))
            receive_until(ws, "turn_completed")
        with client.websocket_connect(WS + "f") as ws:
            ws.send_json({"type": "start", "resume_from": 2, "stream_id": "another-process"})
            attached, history = ws.receive_json(), ws.receive_json()
    assert attached["resumed"] is False and history["type"] == "history"


def test_stored_session_resumes_on_the_first_user_message(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "p") as ws:
            ws.send_json(start_message(lab, "Set the volume to 15"))
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "close"})
            receive_until(ws, "detached")
        with client.websocket_connect(WS + "p") as ws:
            ws.send_json(start_message(lab, "", resume_from=40))
            attached, history = ws.receive_json(), ws.receive_json()
            ws.send_json({"type": "user", "content": "Set the volume to 35"})
            frames = receive_until(ws, "turn_completed")
    assert attached["live"] is False
    assert [m["role"] for m in history["record"]["messages"]][0] == "user"
    assert frames[0]["type"] == "attached" and frames[0]["live"] is True
    started = next(m for m in messages_of(frames) if m["type"] == "audit")
    assert started["event"] == "session_started"
    assert started["details"]["restored_message_count"] >= 2
    assert messages_of(frames)[-1]["turn_index"] == 2


def test_close_ends_the_session_and_a_start_resumes_it(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app), client.websocket_connect(WS + "e") as ws:
        ws.send_json(start_message(lab, "hello"))
        receive_until(ws, "turn_completed")
        ws.send_json({"type": "close"})
        ended = receive_until(ws, "detached")
        assert not app.state.web.hub.is_live("e")
        ws.send_json(start_message(lab, "Set the volume to 5"))
        resumed = receive_until(ws, "turn_completed")
    assert [m["type"] for m in messages_of(ended)][-1] == "done"
    assert resumed[1]["type"] == "history" and resumed[1]["record"]["session"]["id"] == "e"
    assert offsets(resumed)[0] == offsets(ended)[-1] + 1
    assert messages_of(resumed)[-1]["turn_index"] == 2


def test_terminate_tool_ends_the_session(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app), client.websocket_connect(WS + "t") as ws:
        ws.send_json(start_message(lab, "Goodbye, end the session"))
        frames = receive_until(ws, "detached")
        assert not app.state.web.hub.is_live("t")
    kinds = [m["type"] for m in messages_of(frames)]
    assert kinds[-2:] == ["turn_completed", "done"] or kinds[-1] == "done"


def test_bad_connection_override_is_reported(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _), client.websocket_connect(WS + "x") as ws:
        start = start_message(lab, "hello", connection={"base_url": "ftp://nowhere"})
        ws.send_json(start)
        error = ws.receive_json()
        ws.send_json(start_message(lab, "hello"))  # the socket stays usable
        frames = receive_until(ws, "turn_completed")
    # Refused before any runtime starts, naming the field (no longer a ConfigError).
    assert error["type"] == "error" and error["field"] == "connection.base_url"
    assert "http(s)" in error["message"] and "ftp://nowhere" not in error["message"]
    assert frames[0]["type"] == "attached"


def test_socket_rejects_an_overlong_session_id(settings: LabSettings) -> None:
    with (
        in_process(settings) as (client, _, _),
        pytest.raises(WebSocketDisconnect) as closed,
        client.websocket_connect(WS + "x" * 201) as ws,
    ):
        ws.receive_json()
    assert closed.value.code == 1008


def test_commands_sent_just_before_a_disconnect_still_run(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, app):
        with client.websocket_connect(WS + "bye") as ws:
            ws.send_json(start_message(lab, "hello"))
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "close"})
        portal_of(client).call(_wait_not_live, app.state.web.hub, "bye")


async def _wait_not_live(hub: Any, session_id: str) -> None:
    import asyncio

    for _ in range(250):
        if not hub.is_live(session_id):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{session_id} is still live")


def test_a_start_with_a_message_after_opening_leaves_no_request_held(
    settings: LabSettings,
) -> None:
    """The page opens a stored session (no message), then starts it with one (its
    status said ended): the next ``user`` message queues a turn, it does not start the
    held opening request again."""
    with in_process(settings) as (client, lab, _), client.websocket_connect(WS + "held") as ws:
        ws.send_json(start_message(lab, ""))
        attached = ws.receive_json()
        ws.receive_json()  # history
        ws.send_json(start_message(lab, "Set the volume to 10"))
        receive_until(ws, "turn_completed")
        ws.send_json({"type": "user", "content": "Set the volume to 20"})
        frames = receive_until(ws, "turn_completed")
    assert attached["live"] is False
    assert [frame["type"] for frame in frames if "offset" not in frame] == ["queued"]
    assert messages_of(frames)[-1]["turn_index"] == 2
