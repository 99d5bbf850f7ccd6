"""dual_agent arguments are recorded: per event, the resolved arguments and how they
were resolved (the resolver's name, or the forced call's metric key), in the
``event_agent_response`` audit and in the turn record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.infrastructure.simulator.provider import SimulatedProviderServer
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.record.record_support import (
    BUILTIN_TOOLS,
    answer,
    assert_same_records,
    notes_tool,
    reopened,
    request,
    run_once,
    with_events,
)

NOON_IN_BERLIN = "2026-07-14T12:00:00+02:00"


def _audit(outputs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [found] = [o["details"] for o in outputs if o["type"] == "audit" and o["event"] == name]
    return dict(found)


@pytest.mark.asyncio
async def test_resolved_arguments_and_their_resolution_are_recorded(
    simulator: SimulatedProviderServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    registry = build_default_tool_registry(local_backends(tmp_path))
    outputs, live, session_id = await run_once(
        simulator.base_url, database, request("dual_agent", BUILTIN_TOOLS), registry
    )

    # What was sent to the event agent still has no arguments; its answer has them.
    sent = _audit(outputs, "event_agent_request")
    assert all(event["arguments"] == {} for event in sent["events"])
    resolutions = {
        r["event_name"]: r for r in _audit(outputs, "event_agent_response")["resolutions"]
    }
    volume = resolutions["device.volume.adjust"]
    assert volume["arguments"] == {"mode": "absolute", "value": 30}
    assert volume["resolved_by"] == "resolver"
    assert volume["resolver"].endswith("_resolve_volume")
    assert volume["call"] is None
    calendar = resolutions["calendar.schedule.create"]
    assert calendar["resolved_by"] == "argument_generation"
    assert calendar["arguments"]["start_at"] == NOON_IN_BERLIN

    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    events = {e.event_name: e for e in record.events}
    assert events["device.volume.adjust"].arguments == volume["arguments"]
    assert events["device.volume.adjust"].resolver == volume["resolver"]
    generated = events["calendar.schedule.create"]
    assert generated.arguments == calendar["arguments"]
    key = f"generation:1:1:{generated.event_id}"
    assert generated.argument_call == key == calendar["call"]["metric_key"]
    [call] = [c for c in record.model_calls if c.metric_key == key]
    assert call.role == "argument_generation" and call.event_id == generated.event_id
    assert call.request is not None and call.request.audit == "event_agent_request"
    assert record.entries[call.request.audit_seq - 1].event == "event_agent_request"
    with SQLiteSessionStore(database) as store:
        metrics = {c["metric_key"]: c for c in store.usage_summary(session_id)["calls"]}
    assert call.usage is not None and call.usage.total_tokens == metrics[key]["total_tokens"]
    # Each tool ran with the arguments its event was resolved to.
    for tool in record.tool_executions:
        event = next(e for e in record.events if e.event_id == tool.event_id)
        assert tool.arguments == event.arguments


def _notes(ran: list[dict[str, Any]]) -> ToolRegistry:
    def bad_resolver(event: Any, context: Any) -> dict[str, Any]:
        return {"note": 42}  # not a string: the schema rejects it

    return notes_tool(ran, bad_resolver)


@pytest.mark.asyncio
async def test_a_fallback_call_is_named_as_the_way_arguments_were_resolved(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    forced = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "notes_add", "arguments": json.dumps({"note": "buy milk"})},
    }
    sse_server.add(
        with_events("Noting it.", "notes_add"),
        ScriptedResponse.sse(
            {"choices": [{"index": 0, "delta": {"tool_calls": [forced]}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {
                "choices": [],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
            },
        ),
        answer("Kept: buy milk."),
    )
    ran: list[dict[str, Any]] = []
    database = tmp_path / "sessions.sqlite3"
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("dual_agent", ["notes_add"], "note: buy milk"),
        _notes(ran),
    )

    assert outputs[-1] == {"type": "done"}
    assert ran == [{"note": "buy milk"}]
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id))
    [event] = record.events
    assert event.resolved_by == "argument_fallback"
    assert event.resolver is not None and event.resolver.endswith("bad_resolver")
    assert event.arguments == {"note": "buy milk"}
    assert event.argument_call == f"fallback:1:1:{event.event_id}"
    [fallback] = [c for c in record.model_calls if c.role == "argument_fallback"]
    assert fallback.metric_key == event.argument_call
    assert fallback.usage is not None and fallback.usage.total_tokens == 57


def _forced_answer(*events: dict[str, Any]) -> ScriptedResponse:
    return ScriptedResponse.sse(
        *events, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("answer_to_forced_call", "cause"),
    [
        (  # a provider that ignores tool_choice and answers in words
            _forced_answer(
                {"choices": [{"index": 0, "delta": {"content": "Sure! I will note it."}}]}
            ),
            "the model answered with text, not a call: 'Sure! I will note it.'",
        ),
        (  # ... or calls another function: its arguments are never this tool's
            _forced_answer(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": "call_9",
                                        "type": "function",
                                        "function": {
                                            "name": "handoff_note",
                                            "arguments": '{"note": "x"}',
                                        },
                                    }
                                ]
                            },
                        }
                    ]
                }
            ),
            "the model called handoff_note instead",
        ),
    ],
)
async def test_a_forced_call_that_does_not_call_the_tool_fails_the_event_saying_so(
    sse_server: SSETranscriptServer,
    tmp_path: Path,
    answer_to_forced_call: ScriptedResponse,
    cause: str,
) -> None:
    sse_server.add(
        with_events("Noting it.", "notes_add"), answer_to_forced_call, answer("Not noted.")
    )
    ran: list[dict[str, Any]] = []
    outputs, live, _ = await run_once(
        sse_server.base_url,
        tmp_path / "sessions.sqlite3",
        request("dual_agent", ["notes_add"], "note: buy milk"),
        notes_tool(ran),
    )

    assert ran == []  # nothing ran with arguments the model never wrote for it
    [result] = [o["message"]["content"] for o in outputs if o["type"] == "tool_result"]
    assert json.loads(result)["error"] == f"argument generation failed: {cause}"
    failures = _audit(outputs, "event_agent_response")["argument_failures"]
    assert [f["cause"] for f in failures] == [cause]
