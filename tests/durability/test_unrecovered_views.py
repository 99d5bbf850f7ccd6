"""What the views say of a turn whose process was killed, before any runtime reopens
its session: the turn was interrupted (not yet recovered) and each call reads as the
effect ledger has it; nothing reads ``running`` once no live runtime holds the session.
A turn a live runtime is still running reads ``running``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.export import export_session
from agent_lab.application.record.reading import UNRECOVERED_MESSAGE
from agent_lab.application.session_store import INTERRUPTED_MESSAGE, INTERRUPTED_REASON
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import invoke_in
from tests.durability.interrupted_support import hung_child, kill_mid_turn

MODES = ["dual_agent", "chat_agent_tools"]


def _tools(record: Any) -> dict[str, tuple[str, str | None]]:
    return {t.event_name: (t.status, t.failure_reason) for t in record.tool_executions}


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_turn_reads_interrupted_with_the_ledgers_calls_before_any_reopen(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, mode, "killed", "mid_batch")

    with SQLiteSessionStore(db, read_only=True) as store:
        export = export_session(store, "killed")
        stored = store.list_turns("killed")
    (turn,), (record,) = export.turns, export.records
    assert stored[0]["status"] == "running"  # reading changed nothing
    assert record.status == "failed" and record.failure is not None
    assert (record.failure.reason, record.failure.message) == (
        INTERRUPTED_REASON,
        UNRECOVERED_MESSAGE,
    )
    assert (turn.status, turn.failure_reason, turn.failure_message) == (
        "failed",
        INTERRUPTED_REASON,
        UNRECOVERED_MESSAGE,
    )
    # fast.op succeeded (the ledger has its result); pay.send was dispatched: it may
    # have run. As the session reads once a runtime reported them.
    assert _tools(record) == {
        "fast.op": ("succeeded", None),
        "pay.send": ("failed", "outcome_unknown"),
    }
    assert all(call.status != "running" for call in record.model_calls)


def test_sessions_show_of_a_killed_session_says_interrupted_not_running(tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, "dual_agent", "killed", "mid_batch")

    shown = invoke_in(tmp_path, "sessions", "show", "--db", str(db), "killed")

    assert shown.exit_code == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "turn 1 · failed" in text
    assert "running" not in text.replace(INTERRUPTED_MESSAGE, "")  # no turn, tool or row
    assert "not yet recovered" in text
    assert "fast.op e1 succeeded" in shown.stdout
    assert "pay.send e2 uncertain: outcome unknown" in shown.stdout


def test_the_turn_a_live_runtime_runs_still_reads_running(tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite3"
    with (
        hung_child(db, "dual_agent", "live", "mid_batch"),
        SQLiteSessionStore(db, read_only=True) as store,
    ):
        (record,) = export_session(store, "live").records
    assert record.status == "running"


def test_the_web_labs_record_of_a_killed_session_marks_its_calls_as_the_ledger_has_them(
    tmp_path: Path,
) -> None:
    from agent_lab.application.pricing import OverriddenPrices
    from agent_lab.interfaces.web.records import session_record

    db = tmp_path / "sessions.sqlite3"
    kill_mid_turn(db, "dual_agent", "killed", "mid_batch")

    with SQLiteSessionStore(db, read_only=True) as store:
        record = session_record(store, "killed", prices=OverriddenPrices({}))
    (turn,) = record["records"]
    assert turn["status"] == "failed" and turn["failure"]["message"] == UNRECOVERED_MESSAGE
    uncertain = {call["event_name"]: call["status"] for call in record["unreported_calls"]}
    assert uncertain == {"fast.op": "succeeded", "pay.send": "unknown"}
