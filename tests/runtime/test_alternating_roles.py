"""Requests alternate user and assistant after a failed or cancelled turn, live and
reopened (DESIGN.md §8, §9.6: never a transcript the provider rejects).

Alternation-strict chat templates (vLLM or llama.cpp serving Mistral, Gemma or Llama-2
models) refuse two user or two assistant messages in a row. A turn that failed before
any answer leaves its user message unanswered, and a ``dual_agent`` turn's visible
history is two assistant messages (before and after its tools); each request folds such
a run into one message, so both questions still reach the model. The store keeps every
message as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.record.record_support import answer, with_events

MODES: list[ToolInvocationMode] = ["dual_agent", "chat_agent_tools"]
FAILED = ScriptedResponse.error(500, {"error": {"message": "the model is overloaded"}})
VOLUME = "device.volume.adjust"


def _request(mode: ToolInvocationMode, message: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="alternating",
        user_message=message,
        chat_agent=AgentParams(model="strict"),
        event_agent=EventAgentParams(enabled_tools=[VOLUME], max_event_loops=2),
        tool_invocation_mode=mode,
    )


async def _turn(base_url: str, store: SQLiteSessionStore, request: DebugRunRequest) -> str:
    """One ``run()`` turn on a fresh runtime (reopening the session); its last output."""
    async with OpenAICompatibleChatClient(base_url, api_key="k", max_retries=0) as client:
        outputs = [
            output async for output in DebugRuntime(client, session_store=store).run(request)
        ]
    return str(outputs[-1]["type"])


def _roles(body: dict[str, Any]) -> list[str]:
    return [message["role"] for message in body["messages"] if message["role"] != "system"]


def _alternates(roles: list[str]) -> bool:
    plain = [role for role in roles if role in ("user", "assistant")]
    return all(a != b for a, b in zip(plain, plain[1:], strict=False))


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_turn_after_a_failed_one_sends_both_questions_in_one_user_message(
    tmp_path: Path, mode: ToolInvocationMode
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    with SSETranscriptServer(FAILED, answer("Here it is."), answer("Still here.")) as server:
        first = await _turn(server.base_url, store, _request(mode, "What is the WAL?"))
        second = await _turn(server.base_url, store, _request(mode, "Are you there?"))
        third = await _turn(server.base_url, store, _request(mode, "Thanks."))
        bodies = [request.json() for request in server.requests]

    assert (first, second, third) == ("error", "done", "done")
    for body in bodies:
        assert _alternates(_roles(body)), _roles(body)
    users = [m["content"] for m in bodies[1]["messages"] if m["role"] == "user"]
    assert users == ["What is the WAL?\n\nAre you there?"]
    stored = [(m["role"], m["content"]) for m in store.list_messages("alternating")]
    assert stored[:2] == [("user", "What is the WAL?"), ("user", "Are you there?")]


@pytest.mark.asyncio
async def test_a_reopened_dual_agent_turn_with_tools_is_one_assistant_message(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    with SSETranscriptServer(
        with_events("Setting the volume.", VOLUME), answer("It is at 30 now."), answer("Yes.")
    ) as server:
        first = await _turn(server.base_url, store, _request("dual_agent", "Volume to 30"))
        second = await _turn(server.base_url, store, _request("dual_agent", "Is it set?"))
        bodies = [request.json() for request in server.requests]

    assert (first, second) == ("done", "done")
    for body in bodies:
        assert _alternates(_roles(body)), _roles(body)
    assert _roles(bodies[-1]) == ["user", "assistant", "user"]
