"""A session whose runtime was restarted in the other tool mode is told apart by the
modes its turns ran in: in the session list, the REST record and the history frame."""

from __future__ import annotations

from agent_lab.interfaces.settings import LabSettings
from tests.web.web_support import in_process, receive_until, start_message

WS = "ws://127.0.0.1/ws/sessions/"


def test_a_session_continued_in_the_other_mode_lists_the_modes_its_turns_ran_in(
    settings: LabSettings,
) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "mixed") as ws:
            ws.send_json(start_message(lab, "Set the volume to 20", mode="dual_agent"))
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "close"})
            receive_until(ws, "detached")
            ws.send_json(start_message(lab, "Set the volume to 40", mode="chat_agent_tools"))
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "user", "content": "Set the volume to 50"})
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "close"})
            receive_until(ws, "detached")
        with client.websocket_connect(WS + "single") as ws:
            ws.send_json(start_message(lab, "Set the volume to 20", mode="chat_agent_tools"))
            receive_until(ws, "turn_completed")
            ws.send_json({"type": "close"})
            receive_until(ws, "detached")
        listed = {item["id"]: item for item in client.get("/api/sessions").json()["sessions"]}
        record = client.get("/api/sessions/mixed").json()
        with client.websocket_connect(WS + "mixed") as ws:
            ws.send_json(start_message(lab, ""))
            history = receive_until(ws, "history")[-1]
    modes = ["dual_agent", "chat_agent_tools"]
    assert listed["mixed"]["mode"] == "dual_agent"  # its first request's, as before
    assert listed["mixed"]["modes"] == modes
    assert listed["single"]["modes"] == ["chat_agent_tools"]
    assert record["session"]["modes"] == modes
    assert [turn["mode"] for turn in record["records"]] == ["dual_agent", *modes[1:] * 2]
    assert history["record"]["session"]["modes"] == modes
