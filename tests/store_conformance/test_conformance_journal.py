"""The write-ahead tool journal on every store: begin, record, commit, abandon, restore."""

from __future__ import annotations

import pytest

from agent_lab.domain.errors import UsageError
from tests.store_conformance.conformance_support import Backend, assistant, call, tool_reply, user


def test_a_batch_is_pending_until_committed_then_visible_at_once(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "go", messages=[user("go")])
    events = [call("c1"), call("c2")]
    batch = store.begin_batch(
        session, 1, 1, scope="round-1", mode="chat_agent_tools", events=events,
        assistant=assistant("", *events),
    )  # fmt: skip
    store.record_result(batch, "c1", "succeeded", tool_reply(events[0]))

    assert [m["role"] for m in store.list_messages(session)] == ["user"]
    pending = store.list_messages(session, include_pending=True)
    assert [(m["role"], m["state"]) for m in pending] == [
        ("user", "committed"), ("assistant", "pending"), ("tool", "pending"),
    ]  # fmt: skip
    journal = store.list_batches(session)[0]
    assert (journal["state"], journal["scope"]) == ("pending", "round-1")
    assert [c["state"] for c in journal["calls"]] == ["succeeded", "pending"]
    assert journal["calls"][0]["event"]["id"] == "c1"

    store.record_result(batch, "c2", "failed", tool_reply(events[1], '{"error": "x"}'))
    replies = [tool_reply(events[0]), tool_reply(events[1])]
    store.commit_batch(batch, [assistant("", *events), *replies])
    roles = [m["role"] for m in store.list_messages(session)]
    assert roles == ["user", "assistant", "tool", "tool"]
    assert store.list_batches(session)[0]["state"] == "committed"
    with pytest.raises(UsageError):
        store.commit_batch(batch, [])
    with pytest.raises(UsageError):
        store.record_result(batch, "c1", "succeeded", tool_reply(events[0]))


def test_visible_messages_of_a_batch_are_written_with_it(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "go")
    store.begin_batch(
        session, 1, 1, scope="events", mode="dual_agent", events=[call("e1")],
        visible=[assistant("Working on it.")],
    )  # fmt: skip
    assert [m["content"] for m in store.list_messages(session)] == ["Working on it."]


def test_an_abandoned_batch_keeps_landed_results_and_cancels_the_rest(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "go", messages=[user("go")])
    events = [call("c1"), call("c2")]
    batch = store.begin_batch(
        session, 1, 1, scope="round-1", mode="chat_agent_tools", events=events,
        assistant=assistant("", *events),
    )  # fmt: skip
    store.record_result(batch, "c1", "succeeded", tool_reply(events[0]))
    store.abandon_batch(batch)
    store.abandon_batch(batch, "failed")  # no longer pending: left as it is

    journal = store.list_batches(session)[0]
    assert journal["state"] == "cancelled"
    assert [c["state"] for c in journal["calls"]] == ["succeeded", "cancelled"]
    assert journal["calls"][0]["result"]["content"] == '{"ok": true}'
    assert [m["role"] for m in store.list_messages(session)] == ["user"]
    restored = store.list_messages(session, include_pending=True)
    assert [(m["role"], m["state"]) for m in restored] == [
        ("user", "committed"), ("assistant", "cancelled"), ("tool", "cancelled"),
    ]  # fmt: skip


def test_journal_misuse_is_refused(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    with pytest.raises(UsageError):
        store.begin_batch(
            session, 1, 1, scope="s", mode="dual_agent", events=[call("a"), call("a")]
        )
    batch = store.begin_batch(session, 1, 1, scope="s", mode="dual_agent", events=[call("a")])
    with pytest.raises(UsageError):
        store.record_result(batch, "zzz", "succeeded", tool_reply(call("zzz")))
    with pytest.raises(UsageError):
        store.record_result(batch, "a", "done", tool_reply(call("a")))  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        store.commit_batch("no-such-batch", [])
    with pytest.raises(UsageError):
        store.abandon_batch(batch, "committed")  # a batch state, but not one to abandon as
    assert store.list_batches(session)[0]["state"] == "pending"


def test_a_new_claim_cancels_the_batch_a_dead_writer_left_pending(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    session = first.create_session("t", {})
    token = first.claim_session(session, "first", lease_seconds=30)
    first.begin_batch(session, 1, 1, scope="s", mode="dual_agent", events=[call("a")])
    first.release_claim(session, token)  # as a dead process's claim is taken over
    second.claim_session(session, "second")
    assert [b["state"] for b in second.list_batches(session)] == ["cancelled"]
