"""Two provider tool calls with one id in one answer end the run before anything runs.

Real SSE server, real client, real runtime on real SQLite files, in chat_agent_tools
mode. The legal streaming shapes (continuations carrying only the index, the id
repeated on every fragment of its index, no index at all) still run their calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import build_default_tool_registry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import TOOLS_DATABASE_NAME, local_backends
from agent_lab.infrastructure.tool_backends.stores import SQLiteDeviceState
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

VOLUME = "device__volume__adjust"
"""``device.volume.adjust`` under its provider alias."""
START_VOLUME = 50
"""The device's volume before any adjustment."""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _fragment(
    *, index: int | None = None, call_id: str | None = None, name: str | None = None, args: str
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    entry: dict[str, Any] = {"function": function}
    if index is not None:
        entry["index"] = index
    if call_id is not None:
        entry["id"] = call_id
        entry["type"] = "function"
    return _chunk({"tool_calls": [entry]})


def _calls(*fragments: dict[str, Any]) -> ScriptedResponse:
    return ScriptedResponse.sse(*fragments, _chunk({}, "tool_calls"))


ANSWER = ScriptedResponse.sse(_chunk({"content": "Done."}), _chunk({}, "stop"))


async def _run(server: SSETranscriptServer, home: Path) -> tuple[list[dict[str, Any]], Any]:
    """One turn with the built-in volume tool; the outputs and the stored usage summary."""
    request = DebugRunRequest(
        user_message="set the volume",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["device.volume.adjust"]),
        tool_invocation_mode="chat_agent_tools",
    )
    registry = build_default_tool_registry(local_backends(home))
    async with OpenAICompatibleChatClient(server.base_url, max_retries=0) as client:
        with SQLiteSessionStore(home / "sessions.sqlite3") as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            outputs = [dict(output) async for output in runtime.run(request)]
            session_id = str(next(o["session_id"] for o in outputs if o.get("session_id")))
            return outputs, store.usage_summary(session_id)


def _volume(home: Path) -> int:
    return SQLiteDeviceState(home / TOOLS_DATABASE_NAME).volume()


def _results(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(o["message"]["content"]) for o in outputs if o["type"] == "tool_result"]


@pytest.mark.asyncio
async def test_one_id_at_two_indexes_is_a_protocol_error_and_nothing_runs(tmp_path: Path) -> None:
    duplicated = _calls(
        _fragment(index=0, call_id="call_1", name=VOLUME, args=""),
        _fragment(index=1, call_id="call_1", name=VOLUME, args=""),
        _fragment(index=0, args='{"mode": "absolute", "value": 10}'),
        _fragment(index=1, args='{"mode": "absolute", "value": 90}'),
    )
    with SSETranscriptServer(duplicated, fallback=ANSWER) as server:
        outputs, usage = await _run(server, tmp_path)
        requests = server.request_count

    error = outputs[-1]
    assert error["type"] == "error"
    assert error["message"] == "duplicate provider tool-call ID: call_1"
    assert error["failure_reason"] == "protocol_error"
    assert error["exit_class"] == "run_failed"
    assert not any(o["type"] == "tool_result" for o in outputs)
    assert _volume(tmp_path) == START_VOLUME
    assert requests == 1
    [turn] = usage["turns"]
    assert turn["status"] == "failed"
    assert turn["failure_reason"] == "protocol_error"
    assert turn["failure_message"] == "duplicate provider tool-call ID: call_1"
    assert turn["tool_count"] == 0


@pytest.mark.asyncio
async def test_one_id_at_two_indexes_in_one_chunk_is_caught_too(tmp_path: Path) -> None:
    both = {"type": "function", "function": {"name": VOLUME, "arguments": "{}"}}
    duplicated = ScriptedResponse.sse(
        _chunk({"tool_calls": [{"index": 0, "id": "x", **both}, {"index": 1, "id": "x", **both}]}),
        _chunk({}, "tool_calls"),
    )
    with SSETranscriptServer(duplicated, fallback=ANSWER) as server:
        outputs, _ = await _run(server, tmp_path)

    assert outputs[-1]["type"] == "error"
    assert "duplicate provider tool-call ID: x" in outputs[-1]["message"]
    assert not any(o["type"] == "tool_result" for o in outputs)


LEGAL_SHAPES = {
    "continuations carry only the index": _calls(
        _fragment(index=0, call_id="call_a", name=VOLUME, args='{"mode": '),
        _fragment(index=0, args='"absolute", "value": 30}'),
    ),
    "the id repeated on every fragment of its index": _calls(
        _fragment(index=0, call_id="call_a", name=VOLUME, args='{"mode": '),
        _fragment(index=0, call_id="call_a", args='"absolute", '),
        _fragment(index=0, call_id="call_a", name=VOLUME, args='"value": 30}'),
    ),
    "no index at all": _calls(
        _fragment(call_id="call_a", name=VOLUME, args='{"mode": '),
        _fragment(call_id="call_a", args='"absolute", '),
        _fragment(args='"value": 30}'),
    ),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(LEGAL_SHAPES))
async def test_legal_streaming_shapes_still_run_their_call(tmp_path: Path, shape: str) -> None:
    with SSETranscriptServer(LEGAL_SHAPES[shape], fallback=ANSWER) as server:
        outputs, usage = await _run(server, tmp_path)

    assert outputs[-1] == {"type": "done"}
    assert _results(outputs) == [{"tool": "device.volume.adjust", "previous": 50, "volume": 30}]
    assert _volume(tmp_path) == 30
    assert usage["turns"][0]["tool_count"] == 1


@pytest.mark.asyncio
async def test_two_calls_with_their_own_ids_both_run(tmp_path: Path) -> None:
    two = _calls(
        _fragment(index=0, call_id="call_a", name=VOLUME, args=""),
        _fragment(index=1, call_id="call_b", name=VOLUME, args=""),
        _fragment(index=1, call_id="call_b", args='{"mode": "relative", "value": 0}'),
        _fragment(index=0, args='{"mode": "relative", "value": 0}'),
    )
    with SSETranscriptServer(two, fallback=ANSWER) as server:
        outputs, usage = await _run(server, tmp_path)

    assert outputs[-1] == {"type": "done"}
    calls = [o["message"]["tool_call_id"] for o in outputs if o["type"] == "tool_result"]
    assert calls == ["call_a", "call_b"]
    assert usage["turns"][0]["tool_count"] == 2
