"""Live equals reopened: the record folded from a turn's outputs as they happen is the
record read back from the store, field by field, for completed turns in both modes, a
failed turn and a turn cancelled in the middle of its tools; and it agrees with what
the user was shown."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.record import TurnRecord
from agent_lab.application.tools import ToolDefinition, ToolRegistry, build_default_tool_registry
from agent_lab.infrastructure.simulator.provider import SimulatedProviderServer
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.record.record_support import (
    BUILTIN_TOOLS,
    answer,
    assert_same_records,
    cancelled_session,
    reopened,
    request,
    run_once,
    spoken,
    stored_anywhere,
    tool_calls,
    tool_results,
    with_events,
)


def _assert_record_matches_outputs(record: TurnRecord, outputs: list[dict[str, Any]]) -> None:
    """The record tells what the user was shown: the text, events and tool results."""
    said = "".join(r.text + "".join(r.spoken) for r in record.rounds)
    assert said == spoken(outputs)
    shown_events = [o["event"]["id"] for o in outputs if o["type"] == "event"]
    assert [e.event_id for e in record.events] == shown_events
    results = tool_results(outputs)
    assert {t.event_id: t.result for t in record.tool_executions} == results
    stats = [o for o in outputs if o["type"] == "round_stats"]
    assert [r.visible_ttft_ms for r in record.rounds] == [s["ttft_ms"] for s in stats]
    assert [r.elapsed_ms for r in record.rounds] == [s["elapsed_ms"] for s in stats]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_completed_turn_reads_back_as_it_was_recorded_live(
    simulator: SimulatedProviderServer, tmp_path: Path, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    registry = build_default_tool_registry(local_backends(tmp_path))
    outputs, live, session_id = await run_once(
        simulator.base_url, database, request(mode, BUILTIN_TOOLS), registry
    )

    assert outputs[-1] == {"type": "done"}
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    assert record.status == "completed" and record.failure is None
    assert record.mode == mode and record.session_id == session_id
    _assert_record_matches_outputs(record, outputs)
    assert len(record.tool_executions) == 3
    assert all(t.status == "succeeded" for t in record.tool_executions)
    with SQLiteSessionStore(database) as store:
        usage = store.usage_summary(session_id)
    metrics = {c["metric_key"]: c for c in usage["calls"]}
    for call in record.model_calls:
        metric = metrics[call.metric_key]
        assert call.usage is not None
        assert call.usage.total_tokens == metric["total_tokens"]
        assert call.timings.provider_first_chunk_ms is not None
        assert round(call.timings.provider_first_chunk_ms) == metric["ttft_ms"]
        assert call.timings.latency_ms == metric["latency_ms"]
    assert {t.metric_key for t in record.tool_executions} == {
        key for key, c in metrics.items() if c["call_kind"] == "tool_execution"
    }
    assert record.round_count == usage["turns"][0]["round_count"] == len(record.rounds)


@pytest.mark.asyncio
async def test_a_failed_turn_keeps_its_reason_live_stored_and_reopened(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(ScriptedResponse.error(503, {"error": {"message": "overloaded"}}))
    outputs, live, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", []), ToolRegistry()
    )

    error = outputs[-1]
    assert error["type"] == "error" and error["failure_reason"] == "provider_error:http_503"
    [record] = live.records()
    stored = reopened(database, session_id)
    assert_same_records([record], stored)
    assert record.status == "failed"
    assert record.failure is not None
    assert record.failure.reason == "provider_error:http_503"
    assert record.failure.message == error["message"]
    [call] = record.model_calls
    assert (call.status, call.failure_reason) == ("failed", "provider_error:http_503")
    assert [r.status for r in record.rounds] == ["failed"]
    with SQLiteSessionStore(database) as store:
        [turn] = store.list_turns(session_id)
    assert turn["status"] == "failed"
    assert turn["failure_reason"] == "provider_error:http_503"
    assert turn["failure_message"] == error["message"]


def _fast_and_slow(release: asyncio.Event) -> ToolRegistry:
    async def fast(event: Any) -> dict[str, Any]:
        return {"tool": "fast_tool", "done": True}

    async def slow(event: Any) -> dict[str, Any]:
        await release.wait()
        return {"tool": "slow_tool", "done": True}

    schema = {"type": "object", "properties": {}}
    return ToolRegistry(
        [
            ToolDefinition(
                name="fast_tool",
                description="Answers at once.",
                parameters=schema,
                handler=fast,
                argument_resolver=lambda event, context: {},
            ),
            ToolDefinition(
                name="slow_tool",
                description="Waits.",
                parameters=schema,
                handler=slow,
                argument_resolver=lambda event, context: {},
                timeout_seconds=None,
            ),
        ]
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_turn_cancelled_mid_tools_closes_every_open_call(
    sse_server: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    if mode == "dual_agent":
        sse_server.add(with_events("Working on it.", "fast_tool", "slow_tool"))
    else:
        sse_server.add(tool_calls(("call_fast", "fast_tool", {}), ("call_slow", "slow_tool", {})))
    outputs, live, session_id = await cancelled_session(
        sse_server.base_url,
        database,
        _fast_and_slow(asyncio.Event()),
        request(mode, ["fast_tool", "slow_tool"]),
        when=lambda output, outputs: output["type"] == "tool_result",
    )
    assert outputs[-1] == {"type": "done"}

    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    assert record.status == "cancelled"
    assert record.failure is not None and record.failure.reason == "cancelled"
    by_name = {t.event_name: t for t in record.tool_executions}
    assert by_name["fast_tool"].status == "succeeded"
    assert by_name["fast_tool"].result == {"tool": "fast_tool", "done": True}
    assert by_name["slow_tool"].status == "cancelled"
    assert by_name["slow_tool"].failure_reason == "tool_cancelled"
    states = [
        *(t.status for t in record.tool_executions),
        *(c.status for c in record.model_calls),
        *(r.status for r in record.rounds),
    ]
    assert "running" not in states
    with SQLiteSessionStore(database) as store:
        [turn] = store.list_turns(session_id)
    assert (turn["status"], turn["failure_reason"]) == ("cancelled", "cancelled")


@pytest.mark.asyncio
async def test_a_turn_left_open_by_a_dead_runtime_reads_back_as_interrupted(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(answer("Hello again."))
    with SQLiteSessionStore(database) as store:
        session_id = store.create_session("left open", {})
        store.start_turn(session_id, 1, "are you there?")  # its runtime died here
    run_request = request("dual_agent", [], "hello?", session_id=session_id)
    await run_once(sse_server.base_url, database, run_request, ToolRegistry())

    first, second = reopened(database, session_id)
    assert (first.turn_index, first.status, first.user_message) == (1, "failed", "are you there?")
    assert first.failure is not None and first.failure.reason == "interrupted"
    assert (second.turn_index, second.status) == (2, "completed")


@pytest.mark.asyncio
async def test_a_failure_message_is_stored_without_an_echoed_credential(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    encoded = base64.b64encode(b"sk-live-SECRET-7c2e9a41d0").decode()
    sse_server.add(ScriptedResponse.error(401, {"error": {"message": f"bad key {encoded}"}}))
    database = tmp_path / "sessions.sqlite3"
    outputs, live, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", []), ToolRegistry()
    )

    assert outputs[-1]["failure_reason"] == "provider_error:http_401"
    [record] = live.records()
    assert record.failure is not None and "bad key ***" in record.failure.message
    assert_same_records([record], reopened(database, session_id))
    assert not stored_anywhere(database, encoded)


def _deltas(*texts: str) -> list[dict[str, Any]]:
    return [
        {"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]} for t in texts
    ]


def _broken_off(*texts: str) -> ScriptedResponse:
    """A stream that shows ``texts`` and then loses its connection: no end, no usage."""
    return ScriptedResponse.sse(*_deltas(*texts), done=False, abort=True)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_stream_broken_off_mid_answer_keeps_the_text_the_user_saw(
    sse_server: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(_broken_off("The bridge was ", "built in "))
    outputs, live, session_id = await run_once(
        sse_server.base_url, database, request(mode, []), ToolRegistry()
    )

    assert outputs[-1]["type"] == "error"
    assert spoken(outputs) == "The bridge was built in "
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    assert record.status == "failed" and record.failure is not None
    assert record.failure.reason.startswith("provider_error")
    assert [(r.text, r.status) for r in record.rounds] == [("The bridge was built in ", "failed")]
    with SQLiteSessionStore(database) as store:
        assert [m["role"] for m in store.list_messages(session_id)] == ["user"]


@pytest.mark.asyncio
async def test_a_turn_cancelled_mid_answer_keeps_the_text_the_user_saw(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    words = ("The bridge ", "was ", "built ", "in ", "1343.")
    sse_server.add(ScriptedResponse.sse(*_deltas(*words), pause=0.5))
    outputs, live, session_id = await cancelled_session(
        sse_server.base_url,
        database,
        ToolRegistry(),
        request("dual_agent", []),
        when=lambda output, outputs: spoken(outputs) == "The bridge was ",
    )

    assert spoken(outputs) == "The bridge was "
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    assert record.status == "cancelled"
    assert [r.text for r in record.rounds] == ["The bridge was "]
    assert "running" not in [r.status for r in record.rounds]
