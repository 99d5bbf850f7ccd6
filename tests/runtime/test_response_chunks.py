"""The ``chat_agent_response`` audit's raw chunks, for a real SSE stream over HTTP: the
chunks the provider sent, as dicts. Decoded when the audit is taken from the runtime's
own output queue (not while it waits there), and before it goes anywhere when a store
keeps it or the output queue is one of the caller's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.json_values import JsonTextList
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing import InMemorySessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

CHUNKS: list[dict[str, Any]] = [
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
    },
    *(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}],
        }
        for word in ("Bridges ", "are ", "old.")
    ),
    {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    },
]


def _request(session_id: str | None = None) -> DebugRunRequest:
    return DebugRunRequest(
        user_message="", chat_agent=AgentParams(model="m"), session_id=session_id
    )


async def _turn(runtime: DebugRuntime) -> list[dict[str, Any]]:
    """One turn of a session; every output up to ``turn_completed``."""
    io = runtime.start_session(_request())
    await io.input.put("Tell me about bridges.")
    outputs = []
    while (message := await io.output.get())["type"] != "turn_completed":
        outputs.append(message)
    await io.input.put(None)
    while (await io.output.get())["type"] != "done":
        pass
    await runtime.aclose()
    return outputs


def _response(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    details: dict[str, Any] = next(m for m in outputs if m.get("event") == "chat_agent_response")[
        "details"
    ]
    return details


@pytest.mark.asyncio
async def test_the_response_audit_carries_the_providers_chunks_decoded_when_taken() -> None:
    output: CompactQueue[Any] = CompactQueue()
    seen_waiting: list[object] = []
    original_put = output.put

    async def put(item: Any) -> None:  # what the audit holds while it waits in the queue
        await original_put(item)
        if item.get("event") == "chat_agent_response":
            seen_waiting.append(list(item["details"]["raw_chunks"]))

    output.put = put  # type: ignore[method-assign]
    with SSETranscriptServer(ScriptedResponse.sse(*CHUNKS)) as server:
        async with OpenAICompatibleChatClient(server.base_url, "k") as client:
            runtime = DebugRuntime(
                client, registry=ToolRegistry(), queues=RuntimeQueues(output=output)
            )
            outputs = await _turn(runtime)

    assert seen_waiting == [[]], "the chunks were decoded before the audit was taken"
    details = _response(outputs)
    assert details["raw_chunks"] == CHUNKS
    assert type(details["raw_chunks"]) is list  # no store: the JSON texts are not kept
    assert len(details["raw_chunk_offsets_ms"]) == len(CHUNKS)
    assert "".join(m["content"] for m in outputs if m["type"] == "message_delta") == (
        "Bridges are old."
    )


@pytest.mark.asyncio
async def test_an_output_queue_of_the_callers_gets_the_chunks_decoded_at_once() -> None:
    output: asyncio.Queue[Any] = asyncio.Queue()
    with SSETranscriptServer(ScriptedResponse.sse(*CHUNKS)) as server:
        async with OpenAICompatibleChatClient(server.base_url, "k") as client:
            runtime = DebugRuntime(
                client, registry=ToolRegistry(), queues=RuntimeQueues(output=output)
            )
            io = runtime.start_session(_request())
            await io.input.put("Tell me about bridges.")
            queued: list[dict[str, Any]] = []
            while not queued or queued[-1]["type"] != "turn_completed":
                await asyncio.sleep(0.01)
                queued = list(output._queue)  # type: ignore[attr-defined]  # peek, not take
            assert _response(queued)["raw_chunks"] == CHUNKS  # decoded while it waits
            await io.input.put(None)
            await runtime.wait_closed()
            await runtime.aclose()


@pytest.mark.asyncio
async def test_with_a_store_the_audit_is_complete_when_kept_and_keeps_the_providers_bytes() -> None:
    store = InMemorySessionStore()
    with SSETranscriptServer(ScriptedResponse.sse(*CHUNKS)) as server:
        async with OpenAICompatibleChatClient(server.base_url, "k") as client:
            runtime = DebugRuntime(client, registry=ToolRegistry(), session_store=store)
            io = runtime.start_session(_request("s1"))
            await io.input.put("Tell me about bridges.")
            outputs = []
            while (message := await io.output.get())["type"] != "turn_completed":
                outputs.append(message)
            await io.input.put(None)
            await runtime.wait_closed()
            await runtime.aclose()

    chunks = _response(outputs)["raw_chunks"]
    assert chunks == CHUNKS
    assert isinstance(chunks, JsonTextList) and len(chunks.texts) == len(CHUNKS)
    stored = [a for a in store.list_audit_logs("s1") if a["event"] == "chat_agent_response"]
    assert [a["details"]["raw_chunks"] for a in stored] == [CHUNKS]
