"""An answer the provider stopped (``finish_reason`` ``length`` at ``max_tokens``, or
``content_filter``) is told as cut off: each model call keeps its finish reason in its
audit and its stored metric, the round of the record says why it was cut, the same live
and reopened; and a tool call the cut left half-written is never run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application._interrupted import answered_chat_metrics
from agent_lab.application._metrics import ModelCall
from agent_lab.application.session_store import CallMetric
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.sqlite import schema
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.record.record_support import (
    USAGE,
    answer,
    assert_same_records,
    notes_tool,
    reopened,
    request,
    run_once,
    tool_results,
    with_events,
)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _stopped(text: str, reason: str) -> ScriptedResponse:
    return ScriptedResponse.sse(
        _chunk({"role": "assistant", "content": text}),
        _chunk({}, reason),
        {"choices": [], "usage": USAGE},
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("reason", ["length", "content_filter"])
async def test_a_cut_off_answer_is_recorded_with_its_finish_reason_live_and_reopened(
    sse_server: SSETranscriptServer, tmp_path: Path, reason: str
) -> None:
    sse_server.add(_stopped("The three causes are: first, the", reason))
    database = tmp_path / "lab.sqlite3"
    outputs, live, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", []), notes_tool()
    )

    response = next(
        o for o in outputs if o["type"] == "audit" and o["event"] == "chat_agent_response"
    )
    assert response["details"]["call"]["finish_reason"] == reason
    (record,) = live.records()
    assert record.rounds[0].cut_off == reason
    assert record.model_calls[0].finish_reason == reason
    assert_same_records(live.records(), reopened(database, session_id))
    with SQLiteSessionStore(database) as store:
        (call,) = store.usage_summary(session_id)["calls"]
    assert call["finish_reason"] == reason


@pytest.mark.asyncio
async def test_a_finished_answer_is_not_cut_off(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(answer("All done."))
    database = tmp_path / "lab.sqlite3"
    _, live, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", []), notes_tool()
    )
    (record,) = live.records()
    assert record.rounds[0].cut_off is None
    assert record.model_calls[0].finish_reason == "stop"
    with SQLiteSessionStore(database) as store:
        (call,) = store.usage_summary(session_id)["calls"]
    assert call["finish_reason"] == "stop"


def _parameterless(ran: list[str]) -> ToolRegistry:
    """``lights_off`` takes no arguments: half-written arguments would still fit it."""

    def handler(event: Any) -> dict[str, Any]:
        ran.append(event.id)
        return {"tool": "lights_off", "done": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name="lights_off",
                description="Turn the lights off.",
                parameters={"type": "object", "properties": {}},
                handler=handler,
            )
        ]
    )


def _cut_tool_calls(*fragments: dict[str, Any]) -> ScriptedResponse:
    return ScriptedResponse.sse(
        *(_chunk({"tool_calls": [fragment]}) for fragment in fragments),
        _chunk({}, "length"),
        {"choices": [], "usage": USAGE},
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "written",
    [pytest.param("", id="name-only"), pytest.param('{"room": "kit', id="half-json")],
)
async def test_a_tool_call_cut_off_by_length_is_failed_not_run(
    sse_server: SSETranscriptServer, tmp_path: Path, written: str
) -> None:
    """``max_tokens`` ran out while the call was written: its tool does not run, its
    reply says why, and the turn goes on to the model's next round."""
    function = {"name": "lights_off", **({"arguments": written} if written else {})}
    call = {"index": 0, "id": "call_cut", "function": function}
    sse_server.add(_cut_tool_calls(call))
    sse_server.add(answer("I could not finish that call."))
    ran: list[str] = []
    outputs, live, _ = await run_once(
        sse_server.base_url,
        tmp_path / "lab.sqlite3",
        request("chat_agent_tools", ["lights_off"]),
        _parameterless(ran),
    )

    assert ran == []
    error = tool_results(outputs)["call_cut"]["error"]
    assert error.startswith("invalid arguments: cut off: the answer reached its max_tokens")
    assert "before the call's arguments were complete" in error
    assert outputs[-1]["type"] == "done"
    (record,) = live.records()
    assert record.rounds[0].cut_off == "length"
    assert record.tool_executions[0].status == "failed"


@pytest.mark.asyncio
async def test_the_calls_before_the_cut_one_run(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    """Only the call being written when the answer was cut is incomplete."""
    whole = {
        "index": 0,
        "id": "call_whole",
        "function": {"name": "notes_add", "arguments": json.dumps({"note": "milk"})},
    }
    cut = {"index": 1, "id": "call_cut", "function": {"name": "notes_add", "arguments": '{"no'}}
    sse_server.add(_cut_tool_calls(whole, cut))
    sse_server.add(answer("Noted one."))
    ran: list[dict[str, Any]] = []
    outputs, _, _ = await run_once(
        sse_server.base_url,
        tmp_path / "lab.sqlite3",
        request("chat_agent_tools", ["notes_add"]),
        notes_tool(ran),
    )

    assert ran == [{"note": "milk"}]
    results = tool_results(outputs)
    assert results["call_whole"] == {"tool": "notes_add", "kept": "milk"}
    assert "cut off" in results["call_cut"]["error"]


def test_a_store_file_of_the_version_before_gains_the_column(tmp_path: Path) -> None:
    """A version 3 file (no ``finish_reason`` column) is migrated when opened: its calls
    read back with no finish reason, and new calls keep theirs."""
    database = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(database, isolation_level=None)
    for version in (1, 2, 3):
        for statement in schema.MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at)"
        " VALUES ('old', 'old', '{}', 'then', 'then')"
    )
    conn.execute(
        "INSERT INTO call_metrics (session_id, metric_key, turn_index, round_index,"
        " call_kind, agent, mode, prompt_tokens, completion_tokens, total_tokens,"
        " cached_tokens, usage_reported, created_at)"
        " VALUES ('old', 'chat:1:1', 1, 1, 'chat', 'chat_agent', 'dual_agent',"
        " 1, 2, 3, 0, 1, 'then')"
    )
    conn.close()

    with SQLiteSessionStore(database) as store:
        store.append_usage(
            "old",
            CallMetric(
                metric_key="chat:2:1",
                turn_index=2,
                round_index=1,
                call_kind="chat",
                agent="chat_agent",
                mode="dual_agent",
                finish_reason="length",
            ),
        )
        calls = store.usage_summary("old")["calls"]
    assert [(c["metric_key"], c["finish_reason"]) for c in calls] == [
        ("chat:1:1", None),
        ("chat:2:1", "length"),
    ]
    conn = sqlite3.connect(database)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION == 4
    conn.close()


@pytest.mark.asyncio
async def test_a_forced_argument_call_cut_off_by_length_runs_no_tool(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    """dual_agent: the event agent's forced call ran out of tokens mid-arguments: the
    tool does not run with half of them, and the argument call keeps its finish reason."""
    cut = {"index": 0, "id": "call_arg", "function": {"name": "notes_add", "arguments": '{"no'}}
    sse_server.add(with_events("Noting it.", "notes_add"), _cut_tool_calls(cut), answer("No."))
    ran: list[dict[str, Any]] = []
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        tmp_path / "lab.sqlite3",
        request("dual_agent", ["notes_add"], "note: buy milk"),
        notes_tool(ran),
    )

    assert ran == []
    [result] = [o["message"]["content"] for o in outputs if o["type"] == "tool_result"]
    assert json.loads(result)["error"] == (
        "argument generation failed: cut off: the answer reached its max_tokens limit"
        " before the call's arguments were complete"
    )
    (record,) = live.records()
    (argument_call,) = [c for c in record.model_calls if c.role == "argument_generation"]
    assert argument_call.finish_reason == "length"
    assert record.rounds[0].cut_off is None  # the chat answer itself was whole
    with SQLiteSessionStore(tmp_path / "lab.sqlite3") as store:
        calls = store.usage_summary(session_id)["calls"]
    finish = {
        c["call_kind"]: c["finish_reason"] for c in calls if c["call_kind"] != "tool_execution"
    }
    assert finish == {"chat": "stop", "argument_generation": "length"}


@pytest.mark.parametrize("as_text", [True, False], ids=["json-texts", "dicts"])
def test_a_client_whose_streams_do_not_say_gives_the_finish_reason_of_its_chunks(
    as_text: bool,
) -> None:
    """Test doubles yield plain items: the reason comes from the last chunks kept (a usage
    chunk may follow the one with the ``finish_reason``)."""
    call = ModelCall(model="m")
    chunks = [
        _chunk({"content": "Cut"}),
        _chunk({}, "length"),
        {"choices": [], "usage": USAGE},
    ]
    for chunk in chunks:
        call.add_chunk(chunk, json.dumps(chunk).encode() if as_text else None)
    call.observe(object(), first_of_client=False)
    assert call.finish_reason == "length"


def test_a_stream_that_says_none_is_taken_at_its_word() -> None:
    class Told:
        finish_reason = None

    call = ModelCall(model="m")
    call.add_chunk(_chunk({}, "stop"), None)
    call.observe(Told(), first_of_client=False)
    assert call.finish_reason is None


def test_the_metric_of_an_answered_call_of_a_killed_turn_keeps_its_finish_reason() -> None:
    """A turn whose process died is closed from its audits: the chat call that had
    answered gets the metric the live turn would have written, finish reason included."""
    audit = {
        "event": "chat_agent_response",
        "details": {
            "round_index": 1,
            "tool_invocation_mode": "dual_agent",
            "call": {"metric_key": "chat:1:1", "model": "m", "finish_reason": "length"},
        },
    }
    (metric,) = answered_chat_metrics(1, [audit])
    assert metric.finish_reason == "length"
