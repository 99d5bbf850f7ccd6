"""A session deleted under a live runtime's claim (by a tool that checks no claim, or an
older lab): the runtime ends the turn with ``session_persistence_failed:deleted``
(``exit_class`` ``usage``), never an ``internal_error`` with a logged traceback."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application import _claim_lease
from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event

DELETED = "session_persistence_failed:deleted"


def _request(message: str, tools: list[str] | None = None) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="doomed",
        user_message=message,
        chat_agent=AgentParams(model="m"),
        tool_invocation_mode="dual_agent",
        event_agent=EventAgentParams(enabled_tools=tools or []),
    )


def _delete_without_a_claim(path: Path) -> None:
    raw = sqlite3.connect(path, timeout=30)
    try:
        raw.execute("PRAGMA foreign_keys = ON")
        with raw:
            raw.execute("DELETE FROM sessions WHERE id = 'doomed'")
    finally:
        raw.close()


async def _until(queues: Any, types: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while not out or out[-1]["type"] not in types:
        out.append(await asyncio.wait_for(queues.output.get(), timeout=30))
    return out


def _assert_deleted(error: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    assert error["type"] == "error"
    assert error["failure_reason"] == DELETED
    assert error["exit_class"] == "usage"
    assert "the session was deleted while this runtime was driving it" in error["message"]
    assert "session failed unexpectedly" not in caplog.text
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.asyncio
async def test_the_turn_after_the_session_was_deleted_fails_as_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    runtime = DebugRuntime(ScriptedChatClient([text("one"), text("two")]), session_store=store)
    queues = runtime.start_session(_request("first"))
    assert (await _until(queues, {"turn_completed", "error"}))[-1]["type"] == "turn_completed"
    await asyncio.to_thread(_delete_without_a_claim, path)

    await queues.input.put(ChatMessage(role="user", content="second"))
    ended = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    store.close()

    _assert_deleted(ended[-1], caplog)


@pytest.mark.asyncio
async def test_a_tool_batch_whose_session_is_deleted_mid_batch_fails_as_deleted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    path = tmp_path / "lab.sqlite3"

    async def wipe(event: ToolCallEvent) -> dict[str, Any]:
        await asyncio.to_thread(_delete_without_a_claim, path)  # its batch goes too
        return {"ok": True}

    tool = ToolDefinition(
        name="wipe", description="Wipes.", parameters={"type": "object"}, handler=wipe
    )
    store = SQLiteSessionStore(path)
    runtime = DebugRuntime(
        ScriptedChatClient([[text_event("w1", "wipe")], text("done")]),
        registry=ToolRegistry([tool]),
        session_store=store,
    )
    ended = await _until(runtime.start_session(_request("wipe it", ["wipe"])), {"error"})
    await runtime.aclose()
    store.close()

    assert "turn_completed" not in [output["type"] for output in ended]
    _assert_deleted(ended[-1], caplog)


@pytest.mark.asyncio
async def test_an_idle_session_learns_of_its_deletion_from_the_lease_renewal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr(_claim_lease, "LEASE_SECONDS", 0.3)  # renewed every 0.1 s
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    runtime = DebugRuntime(ScriptedChatClient([text("one")]), session_store=store)
    queues = runtime.start_session(_request("first"))
    assert (await _until(queues, {"turn_completed", "error"}))[-1]["type"] == "turn_completed"

    await asyncio.to_thread(_delete_without_a_claim, path)
    ended = await _until(queues, {"error", "done"})  # no turn is sent: the renewal tells
    await runtime.aclose()
    store.close()

    _assert_deleted(ended[-1], caplog)
