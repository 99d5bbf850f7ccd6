"""An invalid stored row ends the open with a clear error naming it (and the claim is
released), or is repaired where the restore rules allow, with the repair audited."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import audits, collect

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text


def _registry() -> ToolRegistry:
    return ToolRegistry(
        [
            ToolDefinition(
                name="lookup",
                description="Looks up.",
                parameters={"type": "object"},
                handler=lambda event: {"ok": True},
            )
        ]
    )


def _stored_session(path: Path) -> SQLiteSessionStore:
    store = SQLiteSessionStore(path)
    store.create_session("rows", {}, session_id="rows")
    store.start_turn("rows", 1, "q1")
    call = ToolCallEvent(id="c1", name="lookup", arguments={}, raw_arguments="{}")
    store.append_messages(
        "rows",
        1,
        [
            ChatMessage(role="user", content="q1"),
            ChatMessage(role="assistant", content="looking", tool_calls=[call]),
            ChatMessage(role="tool", content='{"ok": true}', name="lookup", tool_call_id="c1"),
            ChatMessage(role="assistant", content="found it"),
        ],
    )
    store.complete_turn("rows", 1)
    return store


def _corrupt(path: Path, sql: str, *params: Any) -> int:
    """Run ``sql`` on the file (it must touch one row) and return that row's ``seq``."""
    with sqlite3.connect(path) as conn:
        seq = conn.execute(sql, params).fetchone()[0]
    return int(seq)


def _request() -> DebugRunRequest:
    return DebugRunRequest(
        session_id="rows",
        user_message="again",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["lookup"]),
        tool_invocation_mode="chat_agent_tools",
    )


@pytest.mark.asyncio
async def test_a_row_with_an_unknown_role_gives_an_error_naming_it_and_frees_the_session(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lab.sqlite3"
    store = _stored_session(path)
    seq = _corrupt(
        path, "UPDATE messages SET role = 'bogus' WHERE content = 'found it' RETURNING seq"
    )
    runtime = DebugRuntime(ScriptedChatClient([text("never")]), session_store=store)

    outputs = await asyncio.wait_for(collect(runtime.run(_request())), timeout=30)
    await runtime.aclose()

    error = outputs[-1]
    assert error["type"] == "error"
    assert error["failure_reason"] == "stored_row_invalid"
    assert f"#{seq}" in error["message"]
    assert "'bogus'" in error["message"]
    token = store.claim_session("rows", "another-runtime", lease_seconds=5.0)
    assert token


@pytest.mark.asyncio
async def test_a_tool_call_without_id_is_repaired_and_the_repair_is_audited(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lab.sqlite3"
    store = _stored_session(path)
    broken = json.dumps([{"name": "lookup", "arguments": {}, "raw_arguments": "{}"}])
    seq = _corrupt(
        path,
        "UPDATE messages SET tool_calls = ? WHERE content = 'looking' RETURNING seq",
        broken,
    )
    client = ScriptedChatClient([text("fresh answer")])
    runtime = DebugRuntime(client, registry=_registry(), session_store=store)

    outputs = await asyncio.wait_for(collect(runtime.run(_request())), timeout=30)

    assert outputs[-1]["type"] == "done"
    sent = [(m.role, m.content, m.tool_calls) for m in client.calls[0].messages]
    assert sent == [
        ("user", "q1", []),
        ("assistant", "looking", []),
        ("assistant", "found it", []),
        ("user", "again", []),
    ]
    [started] = audits(outputs, "session_started")
    [repair] = started["details"]["repaired_rows"]
    assert repair["seq"] == seq
    assert "tool_calls entry 0" in repair["problem"]
    stored_audit = [a for a in store.list_audit_logs("rows") if a["event"] == "session_started"]
    assert stored_audit[-1]["details"]["repaired_rows"] == [repair]
