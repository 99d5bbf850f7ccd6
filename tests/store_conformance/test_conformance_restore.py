"""Restoring a session on every store: the runtime that takes a dead writer's claim over
closes the turn it left running as ``failed`` / ``interrupted`` and writes the tool
metrics of its committed batch from that batch's result audit (DESIGN.md §9.7, §10)."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import (
    INTERRUPTED_MESSAGE,
    INTERRUPTED_REASON,
    SessionStore,
)
from agent_lab.domain.errors import SessionBusy
from agent_lab.testing import ScriptedChatClient, text
from tests.store.store_support import ledger_batch
from tests.store_conformance.conformance_support import Backend, call, tool_reply

SCOPE = "s:turn-1:round-1"


def _left_running(dead: SessionStore) -> str:
    """Session ``s``: turn 1 ran one committed batch (``a`` succeeded in 12 ms), then its
    runtime died; returns its claim token."""
    dead.create_session("left running", {}, session_id="s")
    token = dead.claim_session("s", "dead", lease_seconds=30)
    batch = ledger_batch(dead, "a", turn=1)
    dead.mark_dispatched(batch, "a", {})
    dead.record_result(batch, "a", "succeeded", tool_reply(call("a")))
    result = {"event_id": "a", "event_name": "safe_tool", "status": "success"}
    dead.append_audits(
        "s",
        [
            (1, "turn_started", {"turn_elapsed_ms": 0, "turn_index": 1}),
            (
                1,
                "event_batch_results",
                {
                    "turn_elapsed_ms": 5,
                    "scope": SCOPE,
                    "round_index": 1,
                    "results": [{**result, "tool_latency_ms": 12}],
                },
            ),
        ],
    )
    dead.commit_batch(batch, [])
    return token


async def _restore(store: SessionStore) -> list[dict[str, Any]]:
    runtime = DebugRuntime(ScriptedChatClient([text("Welcome back.")]), session_store=store)
    request = DebugRunRequest(
        session_id="s",
        user_message="are you there?",
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=[]),
        tool_invocation_mode="chat_agent_tools",
    )
    return [dict(output) async for output in runtime.run(request)]


def test_a_restore_closes_the_turn_a_dead_writer_left_running(backend: Backend) -> None:
    dead, heir = backend.open(), backend.open()
    token = _left_running(dead)
    dead.release_claim("s", token)  # as a dead process's claim is taken over

    outputs = asyncio.run(_restore(heir))

    assert outputs[-1]["type"] == "done"
    first, second = backend.open().list_turns("s")
    closed = (first["status"], first["failure_reason"], first["failure_message"])
    assert closed == ("failed", INTERRUPTED_REASON, INTERRUPTED_MESSAGE)
    assert first["completed_at"] is not None and second["status"] == "completed"
    summary = backend.open().usage_summary("s")
    assert summary["turns"][0]["status"] == "failed"
    assert summary["turns"][0]["tool_count"] == 1
    (tool,) = [c for c in summary["calls"] if c["call_kind"] == "tool_execution"]
    assert (tool["metric_key"], tool["status"], tool["tool_latency_ms"]) == (
        "tool:1:1:a",
        "success",
        12,
    )


def test_a_live_writers_turn_stays_running(backend: Backend) -> None:
    live, other = backend.open(), backend.open()
    token = _left_running(live)  # its claim is still held, by this live process

    outputs = asyncio.run(_restore(other))

    assert outputs[-1]["type"] == "error"
    assert outputs[-1]["failure_reason"] == SessionBusy.code
    (turn,) = backend.open().list_turns("s")
    assert (turn["status"], turn["completed_at"]) == ("running", None)
    assert backend.open().usage_summary("s")["calls"] == []
    live.release_claim("s", token)  # now it is gone
    assert asyncio.run(_restore(other))[-1]["type"] == "done"
    assert backend.open().list_turns("s")[0]["failure_reason"] == INTERRUPTED_REASON
