"""The provider's chunk bytes reach the store once, as they came.

A real SSE server sends chunks whose JSON text no encoder would write back the same
way (spacing, key order, ``1.50``, ``\\u00e9`` escapes); the runtime streams them
through the real chat client into a real SQLite store. The stored audit row holds
those bytes verbatim, the live audit output still carries plain dicts, and reading
the audit back gives the same dicts.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

KEY = "sk-test-provider-bytes-0123456789"
CHUNKS = [
    b'{ "id" : "c1",  "object":"chat.completion.chunk", "choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"Caf\\u00e9 "}}],'
    b' "vendor": {"z": 1, "a": [1.50, null]} }',
    b'{"id":"c1","choices":[{"index":0,"delta":{"content":"ol\\u00e9"},"finish_reason":null}]}',
    b'{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}',
]
ECHO = b'{"id":"c2","choices":[{"index":0,"delta":{"content":"key ' + KEY.encode() + b'"}}]}'


async def _turn(store: SQLiteSessionStore, *chunks: bytes) -> list[dict[str, Any]]:
    request = DebugRunRequest(
        session_id="bytes", user_message="hi", chat_agent=AgentParams(model="m")
    )
    with SSETranscriptServer(ScriptedResponse.sse(*chunks)) as server:
        async with OpenAICompatibleChatClient(server.base_url, KEY) as client:
            runtime = DebugRuntime(client, session_store=store)
            queues = runtime.start_session(request)
            outputs: list[dict[str, Any]] = []
            while not outputs or outputs[-1]["type"] not in {"turn_completed", "error"}:
                outputs.append(await queues.output.get())
            await runtime.aclose()
    assert outputs[-1]["type"] == "turn_completed", outputs[-1]
    return outputs


def _stored_details(path: Path, event: str) -> str:
    probe = sqlite3.connect(path)
    try:
        row = probe.execute("SELECT details FROM audit_logs WHERE event = ?", (event,)).fetchone()
    finally:
        probe.close()
    return str(row[0])


@pytest.mark.asyncio
async def test_provider_chunk_bytes_are_stored_as_sent_and_shown_as_dicts(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "bytes.sqlite3")
    outputs = await _turn(store, *CHUNKS)
    sent = [json.loads(chunk) for chunk in CHUNKS]

    live = next(o for o in outputs if o["type"] == "audit" and o["event"] == "chat_agent_response")
    assert live["details"]["raw_chunks"] == sent
    assert all(type(chunk) is dict for chunk in live["details"]["raw_chunks"])

    text = _stored_details(store.path, "chat_agent_response")
    assert '"raw_chunks":[' + ",".join(chunk.decode() for chunk in CHUNKS) + "]" in text

    (stored,) = [a for a in store.list_audit_logs("bytes") if a["event"] == "chat_agent_response"]
    assert stored["details"]["raw_chunks"] == sent
    assert stored["details"] == json.loads(json.dumps(live["details"]))
    store.close()


@pytest.mark.asyncio
async def test_a_chunk_echoing_the_api_key_is_stored_masked(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "bytes.sqlite3")
    await _turn(store, ECHO, CHUNKS[2])
    text = _stored_details(store.path, "chat_agent_response")
    assert KEY not in text
    assert "key ***" in text
    store.close()
