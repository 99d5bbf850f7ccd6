"""The tool journal as an effect ledger (DESIGN.md §9.4): pending → dispatched → outcome,
idempotency keys, abandoned calls ``unknown`` or ``cancelled`` by whether they were
dispatched, unreported batches, and the v2 → v3 migration of an older file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import UsageError
from agent_lab.infrastructure.sqlite import schema
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import call, journal_calls, ledger_batch, tool_reply

SCOPE = "s:turn-1:round-1"


def test_each_call_goes_pending_dispatched_outcome_with_its_key(store: SessionStore) -> None:
    batch = ledger_batch(store, "a", "b")
    assert [(c["state"], c["idempotency_key"]) for c in journal_calls(store)] == [
        ("pending", f"{SCOPE}:a"),
        ("pending", f"{SCOPE}:b"),
    ]

    store.mark_dispatched(batch, "a", {"n": 1})
    dispatched = journal_calls(store)[0]
    assert (dispatched["state"], dispatched["arguments"]) == ("dispatched", {"n": 1})
    assert dispatched["dispatched_at"] is not None

    store.record_result(batch, "a", "succeeded", tool_reply(call("a")))
    store.record_result(batch, "b", "failed", tool_reply(call("b"), '{"error": "no"}'))
    assert [c["state"] for c in journal_calls(store)] == ["succeeded", "failed"]
    assert journal_calls(store)[1]["arguments"] is None, "b never reached a handler"


def test_a_call_is_dispatched_once_and_only_in_a_pending_batch(store: SessionStore) -> None:
    batch = ledger_batch(store, "a")
    store.mark_dispatched(batch, "a", {})
    with pytest.raises(UsageError, match="no pending call 'a'"):
        store.mark_dispatched(batch, "a", {})
    with pytest.raises(UsageError, match="no pending call 'zz'"):
        store.mark_dispatched(batch, "zz", {})
    store.commit_batch(batch, [])
    with pytest.raises(UsageError, match="already committed"):
        store.mark_dispatched(batch, "a", {})


def test_abandoning_keeps_outcomes_and_splits_the_rest_by_dispatch(store: SessionStore) -> None:
    batch = ledger_batch(store, "done", "running", "waiting")
    store.mark_dispatched(batch, "done", {})
    store.record_result(batch, "done", "succeeded", tool_reply(call("done")))
    store.mark_dispatched(batch, "running", {})

    store.abandon_batch(batch)

    assert [c["state"] for c in journal_calls(store)] == ["succeeded", "unknown", "cancelled"]


def test_an_outcome_can_be_recorded_as_unknown(store: SessionStore) -> None:
    batch = ledger_batch(store, "a")
    store.mark_dispatched(batch, "a", {})
    store.record_result(batch, "a", "unknown", tool_reply(call("a"), '{"status": "unknown"}'))
    assert [c["state"] for c in journal_calls(store)] == ["unknown"]


def test_unreported_batches_are_abandoned_ones_and_those_of_unfinished_turns(
    store: SessionStore,
) -> None:
    finished = ledger_batch(store, "f1", turn=1)
    store.commit_batch(finished, [])
    store.complete_turn("s", 1)
    abandoned = ledger_batch(store, "x1", turn=2)
    store.abandon_batch(abandoned)
    store.complete_turn("s", 2, status="cancelled")
    cut_off = ledger_batch(store, "c1", turn=3)
    store.commit_batch(cut_off, [])  # turn 3 never finishes: its runtime died
    ledger_batch(store, "p1", turn=4)  # pending: a live runtime's

    unreported = store.list_unreported_batches("s")

    assert [b["id"] for b in unreported] == [abandoned, cut_off]
    assert all(b["reported_turn"] is None for b in unreported)
    store.mark_reported([abandoned, cut_off], 5)
    assert store.list_unreported_batches("s") == []
    assert {b["id"]: b["reported_turn"] for b in store.list_batches("s")}[cut_off] == 5


def _version_two_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for version in (1, 2):
        for statement in schema.MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at)"
        " VALUES ('old', 'old', '{}', 'then', 'then')"
    )
    conn.execute(
        "INSERT INTO turns (session_id, turn_index, status, user_message, started_at)"
        " VALUES ('old', 1, 'running', 'hi', 'then')"
    )
    batches = [("crashed", 1, "pending"), ("stopped", 2, "cancelled"), ("done", 3, "committed")]
    for batch_id, seq, state in batches:
        conn.execute(
            "INSERT INTO tool_batches (seq, id, session_id, turn_index, round_index, scope,"
            " mode, state, created_at) VALUES (?, ?, 'old', 1, ?, ?, 'dual_agent', ?, 'then')",
            (seq, batch_id, seq, f"old:turn-1:round-{seq}", state),
        )
    reply = json.dumps(tool_reply(call("r")).model_dump())
    calls = [
        ("crashed", 0, "open", "pending", None),
        ("crashed", 1, "answered", "succeeded", reply),
        ("stopped", 0, "cut", "cancelled", None),
        ("done", 0, "fine", "succeeded", reply),
    ]
    for batch_id, position, event_id, state, result in calls:
        event = json.dumps(call(event_id).model_dump())
        conn.execute(
            "INSERT INTO tool_calls (batch_id, position, event, event_id, state, result)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (batch_id, position, event, event_id, state, result),
        )
    conn.close()


def test_a_version_two_file_is_migrated_without_claiming_what_it_cannot_know(
    tmp_path: Path,
) -> None:
    """Before the ledger a call without a result may or may not have run."""
    path = tmp_path / "v2.sqlite3"
    _version_two_file(path)
    with SQLiteSessionStore(path) as store:
        batches = {b["id"]: b for b in store.list_batches("old")}
        states = {c["event"]["id"]: c["state"] for b in batches.values() for c in b["calls"]}
        assert states == {
            "open": "dispatched",
            "answered": "succeeded",
            "cut": "unknown",
            "fine": "succeeded",
        }
        assert batches["crashed"]["calls"][0]["idempotency_key"] == "old:turn-1:round-1:open"
        assert {k: b["reported_turn"] for k, b in batches.items()} == {
            "crashed": None,
            "stopped": 1,
            "done": 1,
        }
        assert store.list_unreported_batches("old") == []  # the crashed one is still pending
        store.abandon_batch("crashed")
        (unreported,) = store.list_unreported_batches("old")
        assert [c["state"] for c in unreported["calls"]] == ["unknown", "succeeded"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION == 4
    conn.close()
