"""Deleting a session and its writer claim, on every store (DESIGN.md §9.7).

A session a live runtime drives is never deleted, whichever store (process) asks; the
claim is checked in the deleting transaction. A claim whose lease ran out does not
keep the session, and the runtime that held it then fails as ``deleted``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import pytest

from agent_lab.domain.errors import (
    PersistenceFailed,
    SessionBusy,
    SessionNotFound,
    UsageError,
)
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


def test_a_session_a_live_runtime_drives_is_not_deleted_by_another_store(
    backend: Backend,
) -> None:
    runtime, tool = backend.open(), backend.open()
    session = runtime.create_session("t", {})
    token = runtime.claim_session(session, "runtime one")
    runtime.start_turn(session, 1, "one", messages=[user("one")])

    with pytest.raises(SessionBusy, match="runtime one") as refused:
        tool.delete_session(session)

    assert refused.value.failure_reason == "session_busy"
    assert [m["content"] for m in tool.list_messages(session)] == ["one"]
    runtime.append_message(session, 1, assistant("still mine"))  # the claim is intact
    runtime.complete_turn(session, 1)
    assert [t["status"] for t in runtime.list_turns(session)] == ["completed"]
    runtime.renew_claim(session, token)
    runtime.release_claim(session, token)
    tool.delete_session(session)
    assert tool.get_session(session) is None


def test_the_claimant_itself_cannot_delete_the_session_it_drives(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.claim_session(session, "the runtime")
    with pytest.raises(SessionBusy, match="the runtime"):
        store.delete_session(session)
    assert store.get_session(session) is not None


def test_a_session_whose_claim_expired_is_deleted_and_its_claimant_fails_as_deleted(
    backend: Backend,
) -> None:
    stale, tool = backend.open(), backend.open()
    session = stale.create_session("t", {})
    token = stale.claim_session(session, "stalled", lease_seconds=LEASE)
    stale.start_turn(session, 1, "one", messages=[user("one")])
    batch = stale.begin_batch(session, 1, 1, scope="s", mode="dual_agent", events=[call("a")])
    expire()

    tool.delete_session(session)

    assert tool.get_session(session) is None
    for write in (
        lambda: stale.append_message(session, 1, assistant("late")),
        lambda: stale.complete_turn(session, 1),
        lambda: stale.append_audit(session, 1, "x", {"a": 1}),
        lambda: stale.append_usage(session, chat_metric(1, 1)),
        lambda: stale.begin_batch(session, 1, 2, scope="s", mode="dual_agent", events=[]),
    ):
        with pytest.raises(PersistenceFailed) as failed:
            write()
        assert failed.value.reason == "deleted"
        assert failed.value.failure_reason == "session_persistence_failed:deleted"
        assert failed.value.exit_class == "usage"
    with pytest.raises(UsageError, match="unknown tool batch"):  # gone with the session
        stale.record_result(batch, "a", "succeeded", tool_reply(call("a")))
    with pytest.raises(SessionNotFound):
        stale.renew_claim(session, token)
    with pytest.raises(SessionNotFound):
        stale.release_claim(session, token)
    assert tool.list_sessions() == []


def test_a_claim_and_a_delete_racing_never_both_win(backend: Backend) -> None:
    for attempt in range(10):
        claimant, tool = backend.open(), backend.open()
        session = claimant.create_session(f"race {attempt}", {})
        claimant.start_turn(session, 1, "one", messages=[user("one")])

        outcomes = _race(
            claim=partial(claimant.claim_session, session, "claimant"),
            delete=partial(tool.delete_session, session),
        )

        assert sorted(outcomes.values()) == ["lost", "won"], outcomes
        exists = tool.get_session(session) is not None
        assert exists == (outcomes["claim"] == "won")


def _race(claim: Callable[[], object], delete: Callable[[], object]) -> dict[str, str]:
    """Run both at once: which won (returned) and which lost (was refused)."""
    outcomes: dict[str, str] = {}
    start = threading.Barrier(2)

    def attempt(name: str, action: Callable[[], object]) -> None:
        start.wait()
        try:
            action()
            outcomes[name] = "won"
        except (SessionNotFound, SessionBusy):  # the claim / the delete was refused
            outcomes[name] = "lost"

    threads = [
        threading.Thread(target=attempt, args=("claim", claim)),
        threading.Thread(target=attempt, args=("delete", delete)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes
