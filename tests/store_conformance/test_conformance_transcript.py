"""Sessions, turns and messages behave the same on every store."""

from __future__ import annotations

import pytest

from agent_lab.domain.errors import SessionNotFound, UsageError
from agent_lab.domain.messages import ChatMessage
from tests.store_conformance.conformance_support import Backend, assistant, call, user


def test_sessions_are_created_listed_newest_first_and_deleted_with_their_rows(
    backend: Backend,
) -> None:
    store = backend.open()
    first = store.create_session("  hello\n  world  ", {"tool_invocation_mode": "dual_agent"})
    second = store.create_session("x" * 200, {"tool_invocation_mode": "chat_agent_tools"})
    store.start_turn(first, 1, "hi", messages=[user("hi")])

    listed = store.list_sessions()
    assert [row["id"] for row in listed] == [second, first]
    assert listed[1]["title"] == "hello world"
    assert listed[0]["title"] == "x" * 80
    assert (listed[1]["turn_count"], listed[1]["message_count"]) == (1, 1)
    assert [row["mode"] for row in listed] == ["chat_agent_tools", "dual_agent"]

    store.delete_session(first)
    assert store.get_session(first) is None
    with pytest.raises(SessionNotFound):
        store.list_messages(first)
    with pytest.raises(SessionNotFound):
        store.delete_session(first)
    assert [row["id"] for row in store.list_sessions()] == [second]


def test_a_given_id_is_kept_duplicates_are_refused_and_ensure_keeps_the_config(
    backend: Backend,
) -> None:
    store = backend.open()
    assert store.create_session("t", {"a": 1}, session_id="s-1") == "s-1"
    with pytest.raises(UsageError):
        store.create_session("t", {}, session_id="s-1")
    assert store.ensure_session("s-1", "other", {"a": 2})["config"] == {"a": 1}
    assert store.ensure_session("s-2", "new one", {"b": 3})["config"] == {"b": 3}
    assert store.get_session("s-2") is not None


def test_turns_start_with_their_user_message_and_complete_with_their_failure(
    backend: Backend,
) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    assert store.next_turn_index(session) == 1
    store.start_turn(session, 1, "first", messages=[user("first")])
    store.complete_turn(session, 1, wall_time_ms=120, round_count=2)
    store.start_turn(session, 2, "second")
    store.complete_turn(
        session, 2, status="failed", failure_reason="provider_timeout", failure_message="slow"
    )
    assert store.next_turn_index(session) == 3

    turns = store.list_turns(session)
    assert [(t["turn_index"], t["status"], t["wall_time_ms"], t["round_count"]) for t in turns] == [
        (1, "completed", 120, 2),
        (2, "failed", None, None),
    ]
    assert (turns[1]["failure_reason"], turns[1]["failure_message"]) == ("provider_timeout", "slow")
    assert turns[0]["completed_at"] is not None
    with pytest.raises(UsageError):
        store.start_turn(session, 1, "again")
    with pytest.raises(UsageError):
        store.complete_turn(session, 9)


def test_messages_keep_order_fields_and_tool_calls(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "hi", messages=[user("hi")])
    seqs = store.append_messages(
        session,
        1,
        [
            assistant("", call("c1", "clock", zone="UTC")),
            ChatMessage(role="tool", content="12:00", name="clock", tool_call_id="c1"),
        ],
    )
    assert seqs == [2, 3]
    assert store.append_message(session, 1, assistant("It is noon, ünïcode ✓")) == 4

    messages = store.list_messages(session)
    assert [m["seq"] for m in messages] == [1, 2, 3, 4]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["arguments"] == {"zone": "UTC"}
    assert (messages[2]["name"], messages[2]["tool_call_id"]) == ("clock", "c1")
    assert messages[3]["content"] == "It is noon, ünïcode ✓"
    assert all(m["turn_index"] == 1 for m in messages)


def test_unknown_sessions_raise_session_not_found(backend: Backend) -> None:
    store = backend.open()
    assert store.get_session("nope") is None
    for action in (
        lambda: store.next_turn_index("nope"),
        lambda: store.start_turn("nope", 1, "x"),
        lambda: store.append_message("nope", 1, user("x")),
        lambda: store.list_turns("nope"),
        lambda: store.usage_summary("nope"),
    ):
        with pytest.raises(SessionNotFound):
            action()


def test_a_second_store_on_the_same_database_sees_every_committed_write(
    backend: Backend,
) -> None:
    writer, reader = backend.open(), backend.open()
    session = writer.create_session("shared", {})
    writer.start_turn(session, 1, "hi", messages=[user("hi")])
    writer.append_message(session, 1, assistant("hello"))
    assert [m["content"] for m in reader.list_messages(session)] == ["hi", "hello"]
    assert reader.next_turn_index(session) == 2
