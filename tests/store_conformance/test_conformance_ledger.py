"""The effect ledger on every store (DESIGN.md §9.4): pending → dispatched → outcome,
idempotency keys, abandoned calls ``unknown`` or ``cancelled`` by whether they were
dispatched, unreported batches, and fencing of the ledger's writes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from agent_lab.application.session_store import INTERRUPTED_REASON
from agent_lab.domain.errors import PersistenceFailed, UsageError
from tests.store.store_support import journal_calls, ledger_batch
from tests.store_conformance.conformance_support import Backend, call, tool_reply

SCOPE = "s:turn-1:round-1"
LEASE = 0.3

BATCH_FIELDS = {
    "id", "session_id", "turn_index", "round_index", "scope", "mode", "state",
    "assistant", "created_at", "finished_at", "reported_turn", "calls",
}  # fmt: skip
CALL_FIELDS = {
    "position", "event", "state", "result", "landed_at", "idempotency_key",
    "arguments", "dispatched_at",
}  # fmt: skip


def test_each_call_goes_pending_dispatched_outcome_with_its_key(backend: Backend) -> None:
    store = backend.open()
    batch = ledger_batch(store, "a", "b")
    assert [(c["state"], c["idempotency_key"]) for c in journal_calls(store)] == [
        ("pending", f"{SCOPE}:a"),
        ("pending", f"{SCOPE}:b"),
    ]

    store.mark_dispatched(batch, "a", {"n": 1, "text": "ünïcode"})
    dispatched = journal_calls(store)[0]
    assert (dispatched["state"], dispatched["arguments"]) == (
        "dispatched",
        {"n": 1, "text": "ünïcode"},
    )
    assert dispatched["dispatched_at"] is not None

    store.record_result(batch, "a", "succeeded", tool_reply(call("a")))
    store.record_result(batch, "b", "failed", tool_reply(call("b"), '{"error": "no"}'))
    assert [c["state"] for c in journal_calls(store)] == ["succeeded", "failed"]
    assert journal_calls(store)[1]["arguments"] is None, "b never reached a handler"
    assert journal_calls(store)[1]["dispatched_at"] is None


def test_the_journal_rows_have_the_same_fields_on_every_store(backend: Backend) -> None:
    store = backend.open()
    batch = ledger_batch(store, "a")
    store.mark_dispatched(batch, "a", {})
    (journal,) = store.list_batches("s")
    assert set(journal) == BATCH_FIELDS
    assert set(journal["calls"][0]) == CALL_FIELDS
    assert journal["reported_turn"] is None


def test_keys_arguments_and_dispatch_are_durable_for_another_store(backend: Backend) -> None:
    writer, reader = backend.open(), backend.open()
    batch = ledger_batch(writer, "a", "b")
    writer.mark_dispatched(batch, "a", {"city": "Oslo"})
    writer.close()

    calls = journal_calls(reader)
    assert [(c["idempotency_key"], c["state"], c["arguments"]) for c in calls] == [
        (f"{SCOPE}:a", "dispatched", {"city": "Oslo"}),
        (f"{SCOPE}:b", "pending", None),
    ]


def test_a_call_is_dispatched_once_and_only_in_a_pending_batch(backend: Backend) -> None:
    store = backend.open()
    batch = ledger_batch(store, "a")
    store.mark_dispatched(batch, "a", {})
    with pytest.raises(UsageError, match="no pending call 'a'"):
        store.mark_dispatched(batch, "a", {})
    with pytest.raises(UsageError, match="no pending call 'zz'"):
        store.mark_dispatched(batch, "zz", {})
    with pytest.raises(UsageError, match="unknown tool batch"):
        store.mark_dispatched("no-such-batch", "a", {})
    store.commit_batch(batch, [])
    with pytest.raises(UsageError, match="already committed"):
        store.mark_dispatched(batch, "a", {})


def test_abandoning_keeps_outcomes_and_splits_the_rest_by_dispatch(backend: Backend) -> None:
    store = backend.open()
    batch = ledger_batch(store, "done", "running", "waiting")
    store.mark_dispatched(batch, "done", {})
    store.record_result(batch, "done", "succeeded", tool_reply(call("done")))
    store.mark_dispatched(batch, "running", {})

    store.abandon_batch(batch, "failed")

    (journal,) = store.list_batches("s")
    assert journal["state"] == "failed"
    assert [c["state"] for c in journal["calls"]] == ["succeeded", "unknown", "cancelled"]
    assert [c["result"] is None for c in journal["calls"]] == [False, True, True]


def test_an_outcome_can_be_recorded_as_unknown(backend: Backend) -> None:
    store = backend.open()
    batch = ledger_batch(store, "a")
    store.mark_dispatched(batch, "a", {})
    store.record_result(batch, "a", "unknown", tool_reply(call("a"), '{"status": "unknown"}'))
    assert [c["state"] for c in journal_calls(store)] == ["unknown"]


def test_unreported_batches_are_abandoned_ones_and_those_of_unfinished_turns(
    backend: Backend,
) -> None:
    store = backend.open()
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
    assert set(unreported[0]) == BATCH_FIELDS
    store.mark_reported([abandoned, cut_off], 5)
    assert store.list_unreported_batches("s") == []
    reported = {b["id"]: b["reported_turn"] for b in backend.open().list_batches("s")}
    assert (reported[abandoned], reported[cut_off], reported[finished]) == (5, 5, None)


def test_a_committed_batch_of_a_turn_closed_as_interrupted_is_still_unreported(
    backend: Backend,
) -> None:
    store = backend.open()
    interrupted = ledger_batch(store, "i1", turn=1)
    store.commit_batch(interrupted, [])
    # the runtime that took the session over closed turn 1: its own runtime never did
    store.complete_turn(
        "s", 1, status="failed", failure_reason=INTERRUPTED_REASON, failure_message="gone"
    )
    failed = ledger_batch(store, "f1", turn=2)
    store.commit_batch(failed, [])
    store.complete_turn("s", 2, status="failed", failure_reason="provider_error:http_503")

    assert [b["id"] for b in backend.open().list_unreported_batches("s")] == [interrupted]
    store.mark_reported([interrupted], 3)
    assert store.list_unreported_batches("s") == []


def test_a_batch_is_reported_once_and_an_unknown_one_marks_nothing(backend: Backend) -> None:
    store = backend.open()
    first = ledger_batch(store, "a", turn=1)
    store.abandon_batch(first)
    second = ledger_batch(store, "b", turn=2)
    store.abandon_batch(second)

    store.mark_reported([first], 3)
    store.mark_reported([first], 4)  # already reported: keeps the turn that told the model
    with pytest.raises(UsageError, match="unknown tool batch"):
        store.mark_reported([second, "no-such-batch"], 4)

    assert [b["id"] for b in store.list_unreported_batches("s")] == [second]
    assert {b["id"]: b["reported_turn"] for b in store.list_batches("s")} == {
        first: 3,
        second: None,
    }


def test_taking_over_a_dead_writers_batch_leaves_dispatched_calls_unknown(
    backend: Backend,
) -> None:
    dead, heir = backend.open(), backend.open()
    dead.create_session("ledger", {}, session_id="s")
    token = dead.claim_session("s", "dead", lease_seconds=30)
    batch = ledger_batch(dead, "ran", "queued")
    dead.mark_dispatched(batch, "ran", {"amount": 5})
    dead.release_claim("s", token)  # as a dead process's claim is taken over

    heir.claim_session("s", "heir")

    (unreported,) = heir.list_unreported_batches("s")
    assert unreported["id"] == batch and unreported["state"] == "cancelled"
    assert [(c["state"], c["arguments"]) for c in unreported["calls"]] == [
        ("unknown", {"amount": 5}),
        ("cancelled", None),
    ]


def test_a_fenced_out_writer_cannot_dispatch_or_report_and_changes_nothing(
    backend: Backend,
) -> None:
    stale, owner = backend.open(), backend.open()
    stale.create_session("ledger", {}, session_id="s")
    stale.claim_session("s", "stale", lease_seconds=LEASE)
    batch = ledger_batch(stale, "a", "b")
    stale.mark_dispatched(batch, "a", {"n": 1})
    time.sleep(LEASE + 0.2)
    owner.claim_session("s", "owner")  # the stale writer's batch is abandoned
    before = owner.list_batches("s")
    assert [c["state"] for c in before[0]["calls"]] == ["unknown", "cancelled"]

    writes: list[Callable[[], object]] = [
        lambda: stale.mark_dispatched(batch, "b", {"n": 2}),
        lambda: stale.mark_reported([batch], 1),
    ]
    for write in writes:
        with pytest.raises(PersistenceFailed) as failed:
            write()
        assert failed.value.reason == "taken_over"
        assert "owner" in str(failed.value)

    assert owner.list_batches("s") == before
    assert [b["id"] for b in owner.list_unreported_batches("s")] == [batch]


def test_a_stale_writer_cannot_dispatch_into_the_new_owners_batch(backend: Backend) -> None:
    stale, owner = backend.open(), backend.open()
    stale.create_session("ledger", {}, session_id="s")
    stale.claim_session("s", "stale", lease_seconds=LEASE)
    time.sleep(LEASE + 0.2)
    owner.claim_session("s", "owner")
    batch = ledger_batch(owner, "a")

    with pytest.raises(PersistenceFailed) as failed:
        stale.mark_dispatched(batch, "a", {"forged": True})
    assert failed.value.reason == "taken_over"

    owner.mark_dispatched(batch, "a", {"real": True})
    assert [(c["state"], c["arguments"]) for c in journal_calls(owner)] == [
        ("dispatched", {"real": True})
    ]
