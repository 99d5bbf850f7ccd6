"""Deleting the store file mid-session: later turns fail loudly, none is reported done."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text


async def _until_turn_ends(queues: Any) -> dict[str, Any]:
    while True:
        output = await asyncio.wait_for(queues.output.get(), timeout=30)
        if output["type"] in {"turn_completed", "error"}:
            return dict(output)


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.asyncio
async def test_a_turn_after_the_file_was_deleted_fails_as_file_replaced(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    client = ScriptedChatClient([text("first answer"), text("second answer")])
    runtime = DebugRuntime(client, session_store=store)
    request = DebugRunRequest(
        session_id="deleted",
        user_message="first",
        chat_agent=AgentParams(model="m"),
        tool_invocation_mode="dual_agent",
    )
    queues = runtime.start_session(request)
    assert (await _until_turn_ends(queues))["type"] == "turn_completed"
    await asyncio.to_thread(_delete, path)

    await queues.input.put(ChatMessage(role="user", content="second"))
    ended = await _until_turn_ends(queues)
    await runtime.aclose()
    store.close()

    assert ended["type"] == "error"
    assert ended["failure_reason"] == "session_persistence_failed:file_replaced"
    assert not path.exists()  # nothing pretended to write a new file at the path
