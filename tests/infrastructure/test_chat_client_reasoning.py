"""DeepSeek thinking mode with tools: the reasoning streamed with tool calls goes back
with the assistant message that carries them, over real HTTP.

DeepSeek rejects a request whose assistant ``tool_calls`` message lacks its
``reasoning_content`` (HTTP 400), in that turn's later rounds and in every later turn.
The runtime and the store never see the reasoning; the client remembers it per call id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import build_default_tool_registry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_compat.reasoning_memory import ReasoningMemory
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.testing.sse_server import RecordedRequest, ScriptedResponse, SSETranscriptServer

NOTE = "handoff_note"
THOUGHT = "The user wants a note. I will call handoff_note."
ARGS = '{"message": "cheese is ready"}'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _thinking_call(call_id: str, *reasoning: str | None) -> ScriptedResponse:
    """DeepSeek's thinking-mode shape: reasoning deltas, then the call, ``tool_calls``."""
    head = {"index": 0, "id": call_id, "type": "function", "function": {"name": NOTE}}
    return ScriptedResponse.sse(
        *(_chunk({"content": None, "reasoning_content": part}) for part in reasoning),
        _chunk({"content": None, "tool_calls": [head]}),
        _chunk({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": ARGS}}]}),
        _chunk({"content": None}, "tool_calls"),
    )


def _answer(text: str) -> ScriptedResponse:
    return ScriptedResponse.sse(
        _chunk({"content": None, "reasoning_content": "Done, say so."}),
        _chunk({"content": text}),
        _chunk({}, "stop"),
    )


def _tool_call_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    body = request.json()
    return [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


async def _turns(
    client: OpenAICompatibleChatClient, home: Path, *messages: str
) -> list[list[dict[str, Any]]]:
    registry = build_default_tool_registry(local_backends(home))
    outputs: list[list[dict[str, Any]]] = []
    with SQLiteSessionStore(home / "sessions.sqlite3") as store:
        runtime = DebugRuntime(client, registry=registry, session_store=store)
        for message in messages:
            request = DebugRunRequest(
                session_id="s",
                user_message=message,
                chat_agent=AgentParams(model="deepseek-v4-flash"),
                event_agent=EventAgentParams(enabled_tools=["handoff_note"]),
                tool_invocation_mode="chat_agent_tools",
            )
            outputs.append([dict(output) async for output in runtime.run(request)])
        await runtime.aclose()
    return outputs


@pytest.mark.asyncio
async def test_the_reasoning_goes_back_with_its_calls_in_the_turn_and_later_turns(
    tmp_path: Path,
) -> None:
    server = SSETranscriptServer(
        _thinking_call("call_00_ds1", "The user wants a note. ", "I will call handoff_note."),
        _answer("Set to 20."),
        _answer("You're welcome."),
    )
    async with server, OpenAICompatibleChatClient(server.base_url, max_retries=0) as client:
        turns = await _turns(client, tmp_path, "note: cheese is ready", "thanks")
        requests = server.requests

    assert [turn[-1] for turn in turns] == [{"type": "done"}, {"type": "done"}]
    assert len(requests) == 3
    assert _tool_call_messages(requests[0]) == []
    # The follow-up round of turn 1, and turn 2 (restored from the store), both carry it.
    for request in requests[1:]:
        [message] = _tool_call_messages(request)
        assert message["reasoning_content"] == THOUGHT
        assert message["tool_calls"][0]["id"] == "call_00_ds1"
    # Only tool-call messages: the final answer's reasoning is not sent back.
    final = [m for m in requests[2].json()["messages"] if m["role"] == "assistant"][-1]
    assert final == {"role": "assistant", "content": "Set to 20."}


@pytest.mark.asyncio
async def test_an_empty_reasoning_field_still_goes_back(tmp_path: Path) -> None:
    """The field must be present even when the model wrote no reasoning for the call."""
    server = SSETranscriptServer(_thinking_call("call_e", "", None), _answer("Set."))
    async with server, OpenAICompatibleChatClient(server.base_url, max_retries=0) as client:
        await _turns(client, tmp_path, "note: cheese is ready")
        requests = server.requests

    [message] = _tool_call_messages(requests[1])
    assert message["reasoning_content"] == ""


@pytest.mark.asyncio
async def test_calls_streamed_without_reasoning_go_back_without_the_field(
    tmp_path: Path,
) -> None:
    server = SSETranscriptServer(_thinking_call("call_p"), _answer("Set."))
    async with server, OpenAICompatibleChatClient(server.base_url, max_retries=0) as client:
        await _turns(client, tmp_path, "note: cheese is ready")
        requests = server.requests

    [message] = _tool_call_messages(requests[1])
    assert "reasoning_content" not in message


@pytest.mark.asyncio
async def test_a_new_client_does_not_know_earlier_reasoning(tmp_path: Path) -> None:
    """The documented limit: the memory is the client's, so a new process continuing
    the session sends the stored tool-call message without its reasoning."""
    server = SSETranscriptServer(_thinking_call("call_n", THOUGHT), _answer("Set."), _answer("Ok."))
    async with server:
        async with OpenAICompatibleChatClient(server.base_url, max_retries=0) as first:
            await _turns(first, tmp_path, "note: cheese is ready")
        async with OpenAICompatibleChatClient(server.base_url, max_retries=0) as second:
            await _turns(second, tmp_path, "thanks")
        requests = server.requests

    assert _tool_call_messages(requests[1])[0]["reasoning_content"] == THOUGHT
    assert "reasoning_content" not in _tool_call_messages(requests[2])[0]


def test_the_memory_forgets_the_least_recently_used_ids_first() -> None:
    memory = ReasoningMemory(capacity=2)
    memory.remember("a", "ra")
    memory.remember("b", "rb")
    assert memory.recall(["a"]) == "ra"  # "a" is now the most recent
    memory.remember("c", "rc")
    assert len(memory) == 2
    assert memory.recall(["b"]) is None
    assert memory.recall(["x", "c"]) == "rc"
    assert memory.recall(["a"]) == "ra"
