"""The REST API, in process: sessions, exports, tools, health, the page and its assets."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import create_app
from tests.web.web_support import in_process, receive_until, start_message

WS = "ws://127.0.0.1/ws/sessions/"


def run_turns(
    client: TestClient, lab: Lab, session_id: str, *texts: str, mode: str | None = None
) -> None:
    """Run turns over the WebSocket, then close the session so it is no longer live."""
    with client.websocket_connect(WS + session_id) as ws:
        ws.send_json(start_message(lab, texts[0], mode=mode))
        receive_until(ws, "turn_completed")
        for text in texts[1:]:
            ws.send_json({"type": "user", "content": text})
            receive_until(ws, "turn_completed")
        ws.send_json({"type": "close"})
        receive_until(ws, "detached")


def test_health_reports_the_endpoint(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        body = client.get("/api/health").json()
    assert body["status"] == "ok"
    assert body["endpoint"] == lab.endpoint_description


def test_tool_catalog_has_schemas_and_policies(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        tools = {tool["name"]: tool for tool in client.get("/api/tools").json()["tools"]}
    assert tools["calendar.schedule.create"]["result_policy"] == "template"
    assert tools["session.terminate"]["result_policy"] == "terminate"
    assert tools["device.volume.adjust"]["parameters"]["type"] == "object"
    assert all(tool["enabled_by_default"] for tool in tools.values())


def test_defaults_prefill_the_page(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        request = client.get("/api/defaults").json()["request"]
    assert request["chat_agent"]["model"] == lab.model
    assert request["event_agent"]["enabled_tools"] == list(settings.tools)
    assert "session_id" not in request and "user_message" not in request


def test_session_list_detail_and_usage(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        assert client.get("/api/sessions").json() == {"sessions": []}
        run_turns(client, lab, "s-1", "Set the volume to 20", "thanks")
        listed = client.get("/api/sessions").json()["sessions"]
        detail = client.get("/api/sessions/s-1").json()
    assert [session["id"] for session in listed] == ["s-1"]
    assert listed[0]["usage"]["tool_count"] == 1
    assert listed[0]["usage"]["total_tokens"] > 0
    assert listed[0]["live"] is False
    assert detail["session"]["title"] == "Set the volume to 20"
    assert [message["role"] for message in detail["messages"]][:1] == ["user"]
    assert [turn["turn_index"] for turn in detail["turns"]] == [1, 2]
    assert detail["usage"]["turn_count"] == 2
    offsets = [audit["offset"] for audit in detail["audit"]]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert {"chat_round_started", "event_batch_results"} <= {a["event"] for a in detail["audit"]}


def test_audit_can_be_tailed_after_an_offset(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        run_turns(client, lab, "tail", "hello there")
        audit = client.get("/api/sessions/tail").json()["audit"]
        middle = audit[len(audit) // 2]["offset"]
        tail = client.get(f"/api/sessions/tail?audit_after={middle}").json()["audit"]
    assert tail and all(entry["offset"] > middle for entry in tail)
    assert tail == [entry for entry in audit if entry["offset"] > middle]


def test_unknown_session_is_a_json_404(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        for response in (
            client.get("/api/sessions/nope"),
            client.get("/api/sessions/nope/export"),
            client.delete("/api/sessions/nope"),
        ):
            assert response.status_code == 404
            assert response.headers["content-type"].startswith("application/json")
            assert response.json() == {"detail": "no such session"}  # the id is not echoed


def test_export_json_and_jsonl(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        run_turns(client, lab, "exp", "Search for sqlite wal")
        as_json = client.get("/api/sessions/exp/export?format=json")
        as_lines = client.get("/api/sessions/exp/export?format=jsonl")
        bad = client.get("/api/sessions/exp/export?format=xml")
    assert as_json.headers["content-disposition"] == 'attachment; filename="agent-lab-exp.json"'
    document = as_json.json()
    assert document["export_version"] == 1 and document["session"]["session_id"] == "exp"
    assert document["records"] and document["records"][0]["model_calls"]
    lines = [json.loads(line) for line in as_lines.text.splitlines()]
    assert as_lines.headers["content-type"].startswith("application/x-ndjson")
    assert lines[0]["kind"] == "session"
    kinds = {line["kind"] for line in lines}
    assert {"session", "turn", "message", "record", "cost"} == kinds
    assert sum(line["kind"] == "record" for line in lines) == len(document["records"])
    assert bad.status_code == 422


def test_delete_refuses_live_sessions(settings: LabSettings) -> None:
    with in_process(settings) as (client, lab, _):
        with client.websocket_connect(WS + "busy") as ws:
            ws.send_json(start_message(lab, "hello"))
            receive_until(ws, "turn_completed")
            refused = client.delete("/api/sessions/busy")
            assert client.get("/api/sessions/busy").json()["live"] is True
            ws.send_json({"type": "close"})
            receive_until(ws, "detached")
        deleted = client.delete("/api/sessions/busy")
        gone = client.get("/api/sessions/busy")
    assert refused.status_code == 409
    assert deleted.status_code == 204
    assert gone.status_code == 404


def test_page_and_assets_are_served(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        page = client.get("/")
        script = client.get("/static/app.js")
        style = client.get("/static/style.css")
    assert page.status_code == 200 and "<title>Agent Lab</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert style.status_code == 200 and "text/css" in style.headers["content-type"]


def test_no_cors_headers(settings: LabSettings) -> None:
    with in_process(settings) as (client, _, _):
        response = client.get("/api/health", headers={"Origin": "https://evil.example"})
        preflight = client.options(
            "/api/sessions/x",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE"},
        )
    assert "access-control-allow-origin" not in response.headers
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.asyncio
async def test_rest_over_httpx_asgi_transport(settings: LabSettings) -> None:
    async with Lab(settings) as lab:
        app = create_app(lab)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            runtime = lab.runtime()
            async for _ in runtime.run(lab.request("Set the volume to 30", session_id="asgi")):
                pass
            listed = (await client.get("/api/sessions")).json()["sessions"]
            detail = (await client.get("/api/sessions/asgi")).json()
            missing = await client.get("/api/sessions/missing")
    assert [session["id"] for session in listed] == ["asgi"]
    assert detail["usage"]["tool_count"] == 1
    assert missing.status_code == 404


def test_static_files_ship_with_the_package() -> None:
    from agent_lab.interfaces.web.app import static_dir

    names = {path.name for path in Path(static_dir()).iterdir()}
    assert {"index.html", "app.js", "style.css"} <= names


def test_a_turn_killed_mid_batch_counts_as_a_failed_turn_once_restored(
    settings: LabSettings,
) -> None:
    import asyncio

    from tests.durability.interrupted_support import kill_mid_turn, restore

    kill_mid_turn(settings.database(), "dual_agent", "killed", "mid_batch")
    asyncio.run(restore(settings.database(), "dual_agent", "killed", "did it go through?"))

    with in_process(settings) as (client, _, _):
        (listed,) = client.get("/api/sessions").json()["sessions"]
        detail = client.get("/api/sessions/killed").json()

    assert (listed["status"], listed["failed_turns"]) == ("completed", 1)
    turns = [(turn["turn_index"], turn["status"]) for turn in detail["turns"]]
    records = [(record["turn_index"], record["status"]) for record in detail["records"]]
    assert turns == records == [(1, "failed"), (2, "completed")]
    assert detail["turns"][0]["failure_reason"] == detail["records"][0]["failure"]["reason"]
