"""Real storage faults at every write site of a turn, in both modes (DESIGN.md §9.1–5)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application._transcript import message_from_record
from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import FunctionChatClient, RecordedCall
from tests.durability.storage_faults import FAULTS, SITES, FaultInjectingStore

TINY_FS = os.environ.get("AGENT_LAB_TINY_FS")
"""Set (to a tmpfs folder) when this module runs inside its private mount namespace."""
FAULTS_HERE = FAULTS if TINY_FS else tuple(f for f in FAULTS if f != "disk_full")

BEFORE_HANDLERS = {
    "session_start",
    "turn_start_and_user_message",
    "tool_call_block",
    "dispatch",
    "audit",
}


def _model(mode: str) -> FunctionChatClient:
    calls = {"n": 0}

    def reply(call: RecordedCall) -> list[StreamItem]:
        calls["n"] += 1
        last = call.messages[-1]
        if last.role == "user" and last.name != "event_agent" and call.tools is not None:
            ids = [f"call-{calls['n']}-{i}" for i in (1, 2)]
            if mode == "dual_agent" and not call.tools:
                if not any("Available events" in m.content for m in call.messages):
                    return [StreamItem.message_delta("no tools now")]
                events = [StreamItem.text_event(ToolCallEvent(id=i, name="probe")) for i in ids]
                return [StreamItem.message_delta("working"), *events]
            if mode == "chat_agent_tools" and call.tools:
                return [
                    StreamItem.message_delta("working"),
                    *(
                        StreamItem.provider_tool_call(ToolCallEvent(id=i, name="probe"))
                        for i in ids
                    ),
                ]
        return [StreamItem.message_delta(f"done {calls['n']}")]

    return FunctionChatClient(reply)


def _registry(ran: list[str]) -> ToolRegistry:
    def probe(event: ToolCallEvent) -> dict[str, Any]:
        ran.append(event.id)
        return {"tool": "probe", "ran": event.id}

    return ToolRegistry(
        [
            ToolDefinition(
                name="probe", description="Probe.", parameters={"type": "object"}, handler=probe
            )
        ]
    )


def _request(mode: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="faulty",
        user_message="first turn",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(
            enabled_tools=["probe"], max_event_loops=1, max_parallel_events=1
        ),
        tool_invocation_mode=mode,
    )


async def _until(queues: Any, types: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while not out or out[-1]["type"] not in types:
        out.append(await asyncio.wait_for(queues.output.get(), timeout=10))
    return out


def _assert_wording(message: str, fault: str) -> None:
    lowered = message.lower()
    if fault == "locked":
        assert "busy" in lowered and "disk" not in lowered
    elif fault == "disk_full":
        assert "disk" in lowered
    elif fault == "corrupt":
        assert "malformed" in lowered
    else:
        assert "read-only" in lowered or "read only" in lowered


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
@pytest.mark.parametrize("fault", FAULTS_HERE)
@pytest.mark.parametrize("site", list(SITES))
async def test_a_failed_write_stops_side_effects_and_the_next_turn_recovers(
    tmp_path: Path, site: str, fault: str, mode: str, request: pytest.FixtureRequest
) -> None:
    folder = Path(TINY_FS) / f"{site}-{mode}" if TINY_FS else tmp_path
    folder.mkdir(exist_ok=True)
    path = folder / "lab.sqlite3"
    SQLiteSessionStore(path).close()
    store = FaultInjectingStore(path, site, fault)
    # Closed at the end: a store left open until garbage collection deletes its WAL
    # then, freeing disk space in the middle of a later case's "full disk".
    request.addfinalizer(store.inner.close)
    ran: list[str] = []
    runtime = DebugRuntime(_model(mode), registry=_registry(ran), session_store=store)
    queues = runtime.start_session(_request(mode))
    first = await _until(queues, {"turn_completed", "error"})

    assert store.injected == 1, f"the {site} write never happened"
    error = first[-1]
    assert error["type"] == "error", error
    assert error["failure_reason"] == f"session_persistence_failed:{fault}"
    _assert_wording(error["message"], fault)
    shown = [m["message"]["tool_call_id"] for m in first if m["type"] == "tool_result"]
    if site in BEFORE_HANDLERS:
        assert ran == [] and shown == []
    if site == "result":
        assert ran == ["call-1-1"], "a tool started after a result write failed"
        assert shown == []
    if site == "session_start":
        await runtime.aclose()
        return

    await queues.input.put("second turn")
    second = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert second[-1]["type"] == "turn_completed", second[-1]

    check = SQLiteSessionStore(path)
    records = check.list_messages("faulty")
    validate_tool_transcript([message_from_record(r) for r in records])
    assert records[-1]["content"].startswith("done")
    for batch in check.list_batches("faulty"):
        assert all(call["state"] != "pending" for call in batch["calls"]), batch
    turns = check.list_turns("faulty")
    assert [t["status"] for t in turns if t["status"] == "running"] == [], turns
    if site == "turn_close":  # the refused close was written before the next turn began
        assert (turns[0]["status"], turns[0]["failure_reason"]) == (
            "failed",
            f"session_persistence_failed:{fault}",
        )
        assert [t["status"] for t in turns] == ["failed", "completed"]
    check.close()


def test_disk_full_at_every_site_on_a_real_full_file_system(tmp_path: Path) -> None:
    """Re-run the disk-full cases in a private mount namespace on a 16 MB tmpfs."""
    if TINY_FS:
        return  # already inside the namespace
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    selection = "disk_full and recovers"
    script = (
        f"mount -t tmpfs -o size=16m tmpfs {mount_point} && "
        f'exec "{sys.executable}" -m pytest -q -p no:cacheprovider "{__file__}" -k "{selection}"'
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        env={**os.environ, "AGENT_LAB_TINY_FS": str(mount_point)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{2 * len(SITES)} passed" in done.stdout, done.stdout[-2000:]
