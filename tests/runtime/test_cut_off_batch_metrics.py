"""Tool metrics say what ran: a batch cut off by the turn's end, and calls never run.

A call that finished before its turn was cancelled ran, and its metric says how long it
took; a call whose handler was still running is counted as ``cancelled`` with no
latency; a call that never started gets no metric. A call the registry answered without
calling the handler (unknown tool, arguments that do not fit) has no latency either:
its metric, its ``event_batch_results`` entry and ``sessions show`` say it did not run.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.record import session_records
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call
from tests.runtime.runtime_helpers import audits, read_until

MODES = ["dual_agent", "chat_agent_tools"]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
FAST_SECONDS = 0.03


def _resolver(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    return {"n": 1}


def _registry(started: asyncio.Event) -> ToolRegistry:
    async def fast(event: ToolCallEvent) -> dict[str, Any]:
        await asyncio.sleep(FAST_SECONDS)
        return {"done": True}

    async def hang(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    return ToolRegistry(
        [
            ToolDefinition("fast", "Quick.", SCHEMA, fast, argument_resolver=_resolver),
            ToolDefinition("hang", "Never ends.", SCHEMA, hang, argument_resolver=_resolver),
        ]
    )


def _request(mode: str, *, parallel: int = 1) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="s1",
        user_message="do them all",
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(
            enabled_tools=["fast", "hang"], max_event_loops=1, max_parallel_events=parallel
        ),
        tool_invocation_mode=mode,
    )


def _call(mode: str, call_id: str, name: str, **arguments: Any) -> Any:
    if mode == "dual_agent":
        return text_event(call_id, name)
    return tool_call(call_id, name, **arguments)


def _tool_rows(path: Path) -> dict[str, tuple[str, int | None]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT event_id, status, tool_latency_ms FROM call_metrics"
            " WHERE call_kind = 'tool_execution'"
        ).fetchall()
    return {event_id: (status, latency) for event_id, status, latency in rows}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_batch_counts_the_calls_that_ran_with_what_was_measured(
    tmp_path: Path, mode: str
) -> None:
    """One call at a time: ``a`` finishes, ``b`` hangs and is cut off by the cancel,
    ``c`` never starts."""
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    started = asyncio.Event()
    calls = [_call(mode, "a", "fast", n=1), _call(mode, "b", "hang", n=2)]
    calls.append(_call(mode, "c", "fast", n=3))
    client = ScriptedChatClient([calls, text("unused")])
    runtime = DebugRuntime(client, registry=_registry(started), session_store=store)
    queues = runtime.start_session(_request(mode))
    await asyncio.wait_for(started.wait(), timeout=5)
    assert runtime.cancel_turn()
    outputs = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    assert outputs[-1]["failure_reason"] == "cancelled"
    rows = _tool_rows(path)
    assert set(rows) == {"a", "b"}  # c never started: no execution to count
    status, latency = rows["a"]
    assert status == "success"
    assert latency is not None and latency >= FAST_SECONDS * 1000 * 0.9  # it slept that long
    assert rows["b"] == ("cancelled", None)  # cut off: no latency to give
    assert store.usage_summary("s1")["session"]["tool_count"] == 2
    (record,) = session_records(
        store.list_audit_logs("s1"), session_id="s1", turns=store.list_turns("s1")
    )
    shown = {t.event_id: (t.status, t.latency_ms) for t in record.tool_executions}
    assert shown["a"] == ("succeeded", latency)  # the record gives the metric's figure
    assert shown["b"] == ("cancelled", None)
    store.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_completed_batch_still_measures_each_call(tmp_path: Path, mode: str) -> None:
    """The same calls without the hang: every call ran, every metric has its latency."""
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    calls = [_call(mode, "a", "fast", n=1), _call(mode, "c", "fast", n=3)]
    client = ScriptedChatClient([calls, text("both done")])
    runtime = DebugRuntime(client, registry=_registry(asyncio.Event()), session_store=store)
    queues = runtime.start_session(_request(mode, parallel=2))
    await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    rows = _tool_rows(path)
    assert {event_id: status for event_id, (status, _) in rows.items()} == {
        "a": "success",
        "c": "success",
    }
    assert all(latency is not None and latency >= 27 for _, latency in rows.values())
    store.close()


@pytest.mark.asyncio
async def test_calls_the_registry_refused_have_no_latency(tmp_path: Path) -> None:
    """``chat_agent_tools``: an unknown tool and arguments that do not fit are answered
    by the registry; only the valid call ran its handler."""
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    calls = [
        tool_call("ok", "fast", n=1),
        tool_call("bad", "fast", n="one"),
        tool_call("gone", "nowhere", n=1),
    ]
    client = ScriptedChatClient([calls, text("one of three worked")])
    runtime = DebugRuntime(client, registry=_registry(asyncio.Event()), session_store=store)
    queues = runtime.start_session(_request("chat_agent_tools", parallel=3))
    outputs = await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    rows = _tool_rows(path)
    assert rows["bad"] == ("failed", None)
    assert rows["gone"] == ("failed", None)
    assert rows["ok"][0] == "success" and rows["ok"][1] is not None
    (batch,) = audits(outputs, "event_batch_results")
    latencies = {r["event_id"]: r["tool_latency_ms"] for r in batch["details"]["results"]}
    assert latencies["bad"] is None and latencies["gone"] is None
    assert isinstance(latencies["ok"], int)
    store.close()
