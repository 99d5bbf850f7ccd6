"""One writer per session, with fenced writes, on every store."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from agent_lab.application.session_store import ClaimListing
from agent_lab.domain.errors import PersistenceFailed, SessionBusy
from tests.store_conformance.conformance_support import (
    LEASE,
    Backend,
    assistant,
    call,
    chat_metric,
    expire,
    tool_reply,
    user,
)


def test_a_live_claim_is_exclusive_across_stores(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    session = first.create_session("t", {})
    token = first.claim_session(session, "runtime one")
    with pytest.raises(SessionBusy, match="runtime one"):
        second.claim_session(session, "runtime two")
    first.renew_claim(session, token)
    first.release_claim(session, token)
    assert second.claim_session(session, "runtime two")


def test_a_waiting_claimant_gets_the_session_once_it_is_released(backend: Backend) -> None:
    import threading

    first, second = backend.open(), backend.open()
    session = first.create_session("t", {})
    token = first.claim_session(session, "one")
    releaser = threading.Timer(0.2, first.release_claim, (session, token))
    releaser.start()
    try:
        assert second.claim_session(session, "two", wait_seconds=10)
    finally:
        releaser.join()


def test_an_expired_claim_is_taken_over(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    session = first.create_session("t", {})
    first.claim_session(session, "one", lease_seconds=LEASE)
    expire()
    assert second.claim_session(session, "two")
    with pytest.raises(SessionBusy):
        first.claim_session(session, "one again")


def test_a_stale_writer_is_fenced_out_of_every_write_and_changes_nothing(
    backend: Backend,
) -> None:
    stale, owner = backend.open(), backend.open()
    session = stale.create_session("t", {})
    stale.claim_session(session, "stale", lease_seconds=LEASE)
    stale.start_turn(session, 1, "one", messages=[user("one")])
    batch = stale.begin_batch(session, 1, 1, scope="s", mode="dual_agent", events=[call("a")])
    expire()
    owner.claim_session(session, "owner")
    owner.start_turn(session, 2, "two", messages=[user("two")])
    before = (owner.list_messages(session, include_pending=True), owner.list_turns(session),
              owner.list_batches(session), owner.list_audit_logs(session))  # fmt: skip

    writes: list[Callable[[], object]] = [
        lambda: stale.append_message(session, 1, assistant("late")),
        lambda: stale.start_turn(session, 3, "three"),
        lambda: stale.complete_turn(session, 1),
        lambda: stale.append_audit(session, 1, "x", {"a": 1}),
        lambda: stale.append_usage(session, chat_metric(1, 1)),
        lambda: stale.record_result(batch, "a", "succeeded", tool_reply(call("a"))),
        lambda: stale.commit_batch(batch, [assistant("x")]),
        lambda: stale.abandon_batch(batch),
        lambda: stale.mark_dispatched(batch, "a", {"n": 1}),
        lambda: stale.mark_reported([batch], 2),
        lambda: stale.begin_batch(session, 1, 2, scope="s", mode="dual_agent", events=[]),
        lambda: stale.delete_session(session),
    ]
    for write in writes:
        with pytest.raises(PersistenceFailed) as failed:
            write()
        assert failed.value.reason == "taken_over"
        assert "owner" in str(failed.value)

    after = (owner.list_messages(session, include_pending=True), owner.list_turns(session),
             owner.list_batches(session), owner.list_audit_logs(session))  # fmt: skip
    assert after == before
    assert owner.usage_summary(session)["calls"] == []
    with pytest.raises(SessionBusy, match="lost"):
        stale.renew_claim(session, "whatever")


def test_a_store_that_never_claimed_is_not_fenced(backend: Backend) -> None:
    owner, tool = backend.open(), backend.open()
    session = owner.create_session("t", {})
    owner.claim_session(session, "owner")
    tool.append_audit(session, None, "note", {"by": "a maintenance tool"})
    assert owner.list_audit_logs(session)[0]["details"] == {"by": "a maintenance tool"}


def test_live_claims_lists_the_sessions_live_runtimes_hold_in_any_store(
    backend: Backend,
) -> None:
    runtime, lab = backend.open(), backend.open()
    held, released, lapsed, idle = (runtime.create_session(t, {}) for t in "abcd")
    runtime.claim_session(held, "runtime one")
    token = runtime.claim_session(released, "runtime two")
    runtime.claim_session(lapsed, "runtime three", lease_seconds=LEASE)
    runtime.release_claim(released, token)
    expire()

    assert isinstance(lab, ClaimListing)  # every store of the project lists its claims
    claims = lab.live_claims()

    assert set(claims) == {held}  # not released, lapsed nor never claimed (idle)
    assert claims[held].startswith(f"runtime one, pid {os.getpid()} on ")
    assert idle not in claims
