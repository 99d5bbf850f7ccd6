"""A turn whose process was killed is closed when its session is restored (DESIGN.md §9.7,
§10): the runtime that takes the writer claim over closes the turn's row as ``failed``
with the reason ``interrupted``, so the row, the usage summary, the export's turns and
its records agree. Turns that ended, and the turn of a runtime that is still alive, are
left as they are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from agent_lab.application.export import export_session
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import INTERRUPTED_MESSAGE, INTERRUPTED_REASON
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.durability.interrupted_child import (
    PROMPT,
    child_model,
    child_registry,
    child_request,
)
from tests.durability.interrupted_support import hung_child, kill_mid_turn, restore

MODES = ["dual_agent", "chat_agent_tools"]
INTERRUPTED = ("failed", INTERRUPTED_REASON, INTERRUPTED_MESSAGE)


def _closed_as(turn: dict[str, Any]) -> tuple[Any, Any, Any]:
    return turn["status"], turn["failure_reason"], turn["failure_message"]


@pytest.mark.parametrize("mode", MODES)
def test_every_view_of_a_turn_killed_mid_batch_says_interrupted(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "mid_batch")

    outputs = asyncio.run(restore(db, mode, "killed", "did it go through?"))

    assert outputs[-1]["type"] == "done"
    with SQLiteSessionStore(db) as store:
        first, second = store.list_turns("killed")
        summary = store.usage_summary("killed")
        export = export_session(store, "killed")
    assert _closed_as(first) == INTERRUPTED and first["completed_at"] is not None
    assert first["wall_time_ms"] is None  # when the process died is not known
    assert second["status"] == "completed"
    assert [_closed_as(turn) for turn in summary["turns"]][0] == INTERRUPTED
    exported, record = export.turns[0], export.records[0]
    assert (exported.status, record.status) == ("failed", "failed")
    assert record.failure is not None
    assert (exported.failure_reason, exported.failure_message) == (
        record.failure.reason,
        record.failure.message,
    )
    # The cut-off batch wrote no result audit and the journal has no run times: no tool
    # metric (docs/durability.md); its calls are in the next turn's recovered calls.
    assert summary["turns"][0]["tool_count"] == 0
    # The chat call had answered (its response audit is stored): its metric is written
    # from that audit, so the turns table counts the call the record lists.
    metrics = [c for c in summary["calls"] if c["turn_index"] == 1]
    assert [(m["metric_key"], m["status"]) for m in metrics] == [("chat:1:1", "success")]
    assert [(c.metric_key, c.status) for c in record.model_calls] == [("chat:1:1", "succeeded")]
    assert summary["turns"][0]["model_calls"] == len(record.model_calls)
    recovered = {call.event_name: call.status for call in export.records[1].recovered_calls}
    assert recovered == {"fast.op": "succeeded", "pay.send": "unknown"}


@pytest.mark.parametrize("mode", MODES)
def test_reopening_the_session_closes_the_turn_before_any_new_turn(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "mid_batch")
    with SQLiteSessionStore(db) as store:
        assert store.list_turns("killed")[0]["status"] == "running"

    outputs = asyncio.run(restore(db, mode, "killed", None))  # opened, then closed

    assert [o["type"] for o in outputs if o["type"] != "audit"] == ["session_started", "done"]
    with SQLiteSessionStore(db) as store:
        (turn,) = store.list_turns("killed")
        (record,) = export_session(store, "killed").records
    assert _closed_as(turn) == INTERRUPTED
    assert record.status == "failed" and record.failure is not None
    assert record.failure.reason == INTERRUPTED_REASON


@pytest.mark.parametrize("mode", MODES)
def test_a_committed_batch_of_the_killed_turn_gets_its_measured_tool_metrics(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "after_batch")  # dies in the follow-up model call

    asyncio.run(restore(db, mode, "killed", None))

    with SQLiteSessionStore(db) as store:
        summary = store.usage_summary("killed")
        (record,) = export_session(store, "killed").records
        unreported = store.list_unreported_batches("killed")
    assert _closed_as(summary["turns"][0]) == INTERRUPTED
    assert summary["turns"][0]["tool_count"] == 2
    tools = [call for call in summary["calls"] if call["call_kind"] == "tool_execution"]
    assert {(c["event_name"], c["status"], c["mode"]) for c in tools} == {
        ("fast.op", "success", mode),
        ("pay.send", "success", mode),
    }
    # the figures are the ones the turn record holds from the batch's result audit
    measured = {(t.metric_key, t.latency_ms) for t in record.tool_executions}
    assert {(c["metric_key"], c["tool_latency_ms"]) for c in tools} == measured
    assert all(isinstance(c["tool_latency_ms"], int) for c in tools)
    # the model was never told about the batch: still unreported after the close
    assert [(batch["state"], batch["turn_index"]) for batch in unreported] == [("committed", 1)]


@pytest.mark.parametrize("mode", MODES)
def test_the_next_turn_still_reports_the_closed_turns_committed_batch(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "after_batch")
    asyncio.run(restore(db, mode, "killed", None))  # closes turn 1, runs no turn

    outputs = asyncio.run(restore(db, mode, "killed", "did it go through?"))

    started = next(o for o in outputs if o.get("event") == "session_started")
    recovered = started["details"]["recovered_calls"]  # what this runtime tells the model
    assert {(c["event_name"], c["status"], c["turn_index"]) for c in recovered} == {
        ("fast.op", "succeeded", 1),
        ("pay.send", "succeeded", 1),
    }
    with SQLiteSessionStore(db) as store:
        assert store.list_unreported_batches("killed") == []  # the turn reported them


async def _completed_then_cancelled(db: Path, mode: str) -> None:
    """Turn 1 completes; turn 2 is cancelled once its batch started."""
    with SQLiteSessionStore(db) as store:
        runtime = DebugRuntime(
            child_model(mode, "mid_batch"),
            registry=child_registry("mid_batch"),
            session_store=store,
        )
        async with runtime.session(child_request(mode, "s", "note 1")) as session:
            ended = 0
            async for output in session:
                if output["type"] == "audit" and output["event"] == "event_batch_started":
                    assert runtime.cancel_turn()
                if output["type"] in ("turn_completed", "error"):
                    ended += 1
                    if ended == 1:
                        await session.send(PROMPT)
                    else:
                        await session.close()


@pytest.mark.parametrize("mode", MODES)
def test_turns_that_ended_are_left_as_they_were(
    tmp_path: Path, mode: str, capfd: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sessions.sqlite3"
    asyncio.run(_completed_then_cancelled(db, mode))
    kill_mid_turn(db, mode, "s", "mid_batch")  # turn 3, in another process
    with SQLiteSessionStore(db) as store:
        before = store.list_turns("s")
        metrics_before = store.usage_summary("s")["calls"]
    assert [turn["status"] for turn in before] == ["completed", "cancelled", "running"]

    asyncio.run(restore(db, mode, "s", "did it go through?"))

    with SQLiteSessionStore(db) as store:
        after = store.list_turns("s")
        metrics_after = store.usage_summary("s")["calls"]
    assert after[:2] == before[:2]  # every column, completed_at included
    assert _closed_as(after[2]) == INTERRUPTED
    assert after[3]["status"] == "completed"
    assert [m for m in metrics_after if m["turn_index"] < 3] == metrics_before


def test_the_turn_of_a_live_runtime_is_never_closed(tmp_path: Path) -> None:
    db, mode = tmp_path / "sessions.sqlite3", "dual_agent"
    with hung_child(db, mode, "live", "mid_batch"):
        refused = asyncio.run(restore(db, mode, "live", "did it go through?"))
        with SQLiteSessionStore(db) as store:
            (turn,) = store.list_turns("live")
        assert refused[-1]["type"] == "error"
        assert "being driven by another runtime" in refused[-1]["message"]
        assert turn["status"] == "running" and turn["completed_at"] is None

    asyncio.run(restore(db, mode, "live", "did it go through?"))  # its process is gone now

    with SQLiteSessionStore(db) as store:
        assert _closed_as(store.list_turns("live")[0]) == INTERRUPTED


@pytest.mark.parametrize("mode", MODES)
def test_the_killed_turns_tools_read_as_the_ledger_recorded_them_live_and_reopened(
    tmp_path: Path, mode: str
) -> None:
    from agent_lab.application.record import session_records
    from agent_lab.interfaces.web.record_frames import RecordFeed

    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "mid_batch")
    with SQLiteSessionStore(db) as store:  # what the web lab holds when it resumes
        stored = session_records(
            store.list_audit_logs("killed"), session_id="killed", turns=store.list_turns("killed")
        )
    feed = RecordFeed(None, [record for record in stored if record.status == "running"])

    outputs = asyncio.run(restore(db, mode, "killed", "did it go through?"))

    live: dict[int, dict[str, Any]] = {}
    for output in outputs:
        for frame in feed.after(cast(OutputMessage, output)):
            live[frame["turn_index"]] = frame["record"]
    with SQLiteSessionStore(db) as store:
        reopened = export_session(store, "killed").records[0].model_dump(mode="json")
    tools = {
        t["event_name"]: (t["status"], t["failure_reason"]) for t in reopened["tool_executions"]
    }
    # fast.op ran (its result is in the ledger); pay.send may have: never "cancelled"
    assert tools == {"fast.op": ("succeeded", None), "pay.send": ("failed", "outcome_unknown")}
    assert live[1]["tool_executions"] == reopened["tool_executions"]
