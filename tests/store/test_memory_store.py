"""The ``SessionStore`` behaviour suite, run against the SQLite and in-memory stores."""

from __future__ import annotations

import re
import threading
import time
import uuid
from enum import Enum
from typing import Any

import pytest

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionBusy, SessionNotFound, UsageError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.memory_store import InMemorySessionStore
from tests.store.store_support import StoreFactory, assistant, call, metric, tool_reply, user

MESSAGE_KEYS = {
    "seq",
    "turn_index",
    "role",
    "content",
    "name",
    "tool_call_id",
    "tool_calls",
    "created_at",
}


def _new_session(store: SessionStore, **config: Any) -> str:
    return store.create_session("a session", config)


def _strip_volatile(value: Any) -> Any:
    """Replace ids and timestamps so two stores' outputs can be compared."""
    if isinstance(value, dict):
        return {
            key: "<volatile>"
            if key in {"created_at", "updated_at", "landed_at", "finished_at"}
            or (key in {"id", "session_id"} and isinstance(value[key], str))
            else _strip_volatile(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_strip_volatile(item) for item in value]
    return value


# ------------------------------------------------------------------- protocol


def test_both_stores_satisfy_the_port(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)


# ------------------------------------------------------------------- sessions


def test_create_session_generates_uuid_hex_folds_title_and_keeps_config(
    store: SessionStore,
) -> None:
    title = "  first   message\n\twith  " + "x" * 100
    session_id = store.create_session(title, {"tool_invocation_mode": "chat_agent_tools"})
    assert re.fullmatch(r"[0-9a-f]{32}", session_id)
    session = store.get_session(session_id)
    assert session is not None
    assert session["title"] == ("first message with " + "x" * 100)[:80]
    assert len(session["title"]) == 80
    assert session["config"] == {"tool_invocation_mode": "chat_agent_tools"}
    assert session["mode"] == "chat_agent_tools"
    assert session["turn_count"] == 0
    assert session["message_count"] == 0
    assert session["created_at"] == session["updated_at"]
    assert set(session) == {
        "id",
        "title",
        "config",
        "created_at",
        "updated_at",
        "turn_count",
        "message_count",
        "mode",
    }


def test_create_session_with_existing_id_is_a_usage_error(store: SessionStore) -> None:
    store.create_session("one", {}, session_id="dup")
    with pytest.raises(UsageError, match="'dup'"):
        store.create_session("two", {}, session_id="dup")
    session = store.get_session("dup")
    assert session is not None and session["title"] == "one"


@pytest.mark.parametrize("bad_id", ["", "   "])
def test_create_session_rejects_blank_ids(store: SessionStore, bad_id: str) -> None:
    with pytest.raises(UsageError):
        store.create_session("t", {}, session_id=bad_id)


def test_ensure_session_creates_once_and_keeps_existing_config(store: SessionStore) -> None:
    created = store.ensure_session("s-1", "first", {"tool_invocation_mode": "dual_agent"})
    assert created["id"] == "s-1" and created["mode"] == "dual_agent"
    again = store.ensure_session("s-1", "second", {"tool_invocation_mode": "chat_agent_tools"})
    assert again["title"] == "first"
    assert again["config"] == {"tool_invocation_mode": "dual_agent"}


def test_config_is_a_copy_not_the_callers_object(store: SessionStore) -> None:
    config: dict[str, Any] = {"nested": {"value": 1}}
    session_id = store.create_session("t", config)
    config["nested"]["value"] = 2
    session = store.get_session(session_id)
    assert session is not None
    session["config"]["nested"]["value"] = 3
    assert store.get_session(session_id)["config"] == {"nested": {"value": 1}}  # type: ignore[index]


def test_get_session_returns_none_for_unknown_ids(store: SessionStore) -> None:
    assert store.get_session("nope") is None


def test_list_sessions_is_newest_first(store: SessionStore) -> None:
    ids = [store.create_session(f"s{i}", {}, session_id=f"s{i}") for i in range(4)]
    assert [session["id"] for session in store.list_sessions()] == ids[::-1]


def test_delete_session_removes_everything(store: SessionStore) -> None:
    session_id = _new_session(store)
    other = _new_session(store)
    store.start_turn(session_id, 1, "hi")
    store.append_message(session_id, 1, user("hi"))
    store.append_audit(session_id, 1, "turn_started", {})
    store.append_usage(session_id, metric("chat:1:1", total_tokens=3))
    store.begin_batch(session_id, 1, 1, scope="s:round-1", mode="dual_agent", events=[call("e")])
    store.claim_session(session_id, "runtime", lease_seconds=0.2)
    store.append_message(other, 1, user("kept"))
    time.sleep(0.4)  # a live claim keeps the session; an expired one does not
    store.delete_session(session_id)
    assert store.get_session(session_id) is None
    assert [session["id"] for session in store.list_sessions()] == [other]
    assert [message["content"] for message in store.list_messages(other)] == ["kept"]
    with pytest.raises(SessionNotFound):
        store.list_messages(session_id)
    # The id is free again, with nothing left over.
    store.create_session("again", {}, session_id=session_id)
    assert store.list_messages(session_id) == []
    assert store.list_batches(session_id) == []
    assert store.usage_summary(session_id)["calls"] == []
    store.claim_session(session_id, "another runtime")


def test_delete_unknown_session_raises_session_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound, match="'ghost'"):
        store.delete_session("ghost")


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("next_turn_index", ()),
        ("start_turn", (1, "hi")),
        ("complete_turn", (1,)),
        ("append_message", (1, ChatMessage(role="user", content="x"))),
        ("append_messages", (1, [])),
        ("list_messages", ()),
        ("append_audit", (1, "e", {})),
        ("append_audits", ([],)),
        ("list_audit_logs", ()),
        ("append_usage", (metric("chat:1:1"),)),
        ("append_usages", ([],)),
        ("usage_summary", ()),
        ("list_batches", ()),
        ("claim_session", ("owner",)),
        ("renew_claim", ("token",)),
        ("release_claim", ("token",)),
    ],
)
def test_unknown_session_ids_raise_session_not_found_naming_the_id(
    store: SessionStore, method: str, args: tuple[Any, ...]
) -> None:
    with pytest.raises(SessionNotFound, match="'missing-id'") as raised:
        getattr(store, method)("missing-id", *args)
    assert isinstance(raised.value, KeyError)


def test_begin_batch_on_unknown_session_raises_session_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.begin_batch("missing", 1, 1, scope="x", mode="dual_agent", events=[])


# ---------------------------------------------------------------------- turns


def test_turn_indexes_continue_from_the_highest_recorded_turn(store: SessionStore) -> None:
    session_id = _new_session(store)
    assert store.next_turn_index(session_id) == 1
    store.start_turn(session_id, 1, "old")  # never completed: still counts
    assert store.next_turn_index(session_id) == 2
    store.start_turn(session_id, 5, "later")
    assert store.next_turn_index(session_id) == 6


def test_start_turn_records_a_running_turn_without_a_message(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.start_turn(session_id, 1, "hello")
    assert store.list_messages(session_id) == []
    [turn] = store.usage_summary(session_id)["turns"]
    assert turn["status"] == "running" and turn["user_message"] == "hello"
    assert store.get_session(session_id)["turn_count"] == 1  # type: ignore[index]
    with pytest.raises(UsageError, match="already exists"):
        store.start_turn(session_id, 1, "again")


def test_complete_turn_records_status_wall_time_and_rounds(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.start_turn(session_id, 1, "hello")
    store.complete_turn(session_id, 1, status="failed", wall_time_ms=120, round_count=2)
    [turn] = store.usage_summary(session_id)["turns"]
    assert (turn["status"], turn["turn_wall_time_ms"], turn["round_count"]) == ("failed", 120, 2)
    with pytest.raises(UsageError, match="never started"):
        store.complete_turn(session_id, 9)


# ---------------------------------------------------------------- transcript


def test_messages_round_trip_in_order_with_per_session_seq(store: SessionStore) -> None:
    session_id = _new_session(store)
    other = _new_session(store)
    event = call("call-1", "calendar.schedule.create", title="Standup", when={"h": 9})
    messages = [
        user("hi"),
        assistant("", event),
        tool_reply(event),
        ChatMessage(role="user", content="EventAgent results:\n{}", name="event_agent"),
    ]
    assert store.append_message(other, 1, user("elsewhere")) == 1
    assert store.append_message(session_id, 1, messages[0]) == 1
    assert store.append_messages(session_id, 1, messages[1:]) == [2, 3, 4]
    assert store.append_messages(session_id, 2, []) == []
    listed = store.list_messages(session_id)
    assert all(set(message) == MESSAGE_KEYS for message in listed)
    assert [message["seq"] for message in listed] == [1, 2, 3, 4]
    rebuilt = [
        ChatMessage.model_validate({key: message[key] for key in ChatMessage.model_fields})
        for message in listed
    ]
    assert rebuilt == messages
    assert listed[1]["tool_calls"] == [event.model_dump()]
    assert listed[2]["tool_call_id"] == "call-1" and listed[2]["name"] == event.name
    session = store.get_session(session_id)
    assert session is not None and session["message_count"] == 4
    assert session["updated_at"] >= session["created_at"]


def test_unicode_and_large_content_round_trip(store: SessionStore) -> None:
    session_id = _new_session(store)
    text = "héllo ✓ 日本語 \x00 null " + "z" * 200_000
    store.append_message(session_id, 1, user(text))
    assert store.list_messages(session_id)[0]["content"] == text


def test_append_messages_is_all_or_nothing_on_bad_input(store: SessionStore) -> None:
    session_id = _new_session(store)
    bad = assistant("", call("c", arguments_object=object()))
    with pytest.raises(UsageError, match="JSON"):
        store.append_messages(session_id, 1, [user("first"), bad])
    assert store.list_messages(session_id) == []


# ------------------------------------------------------------------- audits


class _Colour(Enum):
    RED = "red"


def test_audits_keep_insertion_order_with_increasing_ids(store: SessionStore) -> None:
    session_id = _new_session(store)
    first = store.append_audit(session_id, None, "session_started", {"turn_elapsed_ms": 0})
    store.append_audits(
        session_id,
        [(1, "turn_started", {"turn_elapsed_ms": 1}), (1, "chat_round_started", {"n": [1]})],
    )
    last = store.append_audit(session_id, 1, "turn_completed", {"colour": _Colour.RED})
    audits = store.list_audit_logs(session_id)
    assert [audit["event"] for audit in audits] == [
        "session_started",
        "turn_started",
        "chat_round_started",
        "turn_completed",
    ]
    ids = [audit["id"] for audit in audits]
    assert ids == sorted(set(ids)) and ids[0] == first and ids[-1] == last
    assert [audit["turn_index"] for audit in audits] == [None, 1, 1, 1]
    assert audits[2]["details"] == {"n": [1]}
    assert audits[3]["details"] == {"colour": "red"}
    assert set(audits[0]) == {"id", "turn_index", "event", "details", "created_at"}


def test_list_audit_logs_after_id_tails_new_records(store: SessionStore) -> None:
    session_id = _new_session(store)
    first = store.append_audit(session_id, 1, "a", {})
    store.append_audit(session_id, 1, "b", {})
    assert [audit["event"] for audit in store.list_audit_logs(session_id, after_id=first)] == ["b"]


def test_append_audits_is_all_or_nothing_on_bad_details(store: SessionStore) -> None:
    session_id = _new_session(store)
    with pytest.raises(UsageError, match="'bad'"):
        store.append_audits(session_id, [(1, "good", {}), (1, "bad", {"x": object()})])
    assert store.list_audit_logs(session_id) == []


# ------------------------------------------------------------------- metrics


def test_usage_summary_aggregates_calls_turns_and_session(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.start_turn(session_id, 1, "first")
    store.start_turn(session_id, 2, "second")
    store.append_usages(
        session_id,
        [
            metric("chat:1:1", prompt_tokens=10, completion_tokens=5, total_tokens=15,
                   cached_tokens=2, ttft_ms=10, latency_ms=40, model="m"),
            metric("fallback:1:1:e1", total_tokens=7, event_id="e1", event_name="t"),
            metric("generation:1:1:e2", total_tokens=3, event_id="e2", event_name="t"),
            metric("tool:1:1:e1", tool_latency_ms=20, event_id="e1", status="success"),
            metric("tool:1:1:e2", tool_latency_ms=25, event_id="e2", status="success"),
            metric("chat:1:2", total_tokens=4, usage_reported=False),
        ],
    )  # fmt: skip
    store.append_usage(session_id, metric("chat:2:1", total_tokens=100))
    store.complete_turn(session_id, 1, wall_time_ms=60, round_count=2)
    store.complete_turn(session_id, 2, wall_time_ms=40, round_count=1)
    usage = store.usage_summary(session_id)
    assert [call["metric_key"] for call in usage["calls"]] == [
        "chat:1:1",
        "fallback:1:1:e1",
        "generation:1:1:e2",
        "tool:1:1:e1",
        "tool:1:1:e2",
        "chat:1:2",
        "chat:2:1",
    ]
    first = usage["calls"][0]
    assert set(first) == {*metric("chat:1:1").model_dump(), "created_at"}
    assert (first["ttft_ms"], first["latency_ms"], first["model"]) == (10, 40, "m")
    assert usage["calls"][5]["usage_reported"] is False
    assert usage["calls"][3]["tool_latency_ms"] == 20
    turn_one, turn_two = usage["turns"]
    assert turn_one == {
        "turn_index": 1,
        "status": "completed",
        "turn_wall_time_ms": 60,
        "round_count": 2,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 29,
        "cached_tokens": 2,
        "model_calls": 4,
        "tool_count": 2,
        "fallback_count": 1,
        "unreported_usage_calls": 1,
        "user_message": "first",
        "failure_reason": None,
        "failure_message": None,
    }
    assert turn_two["total_tokens"] == 100 and turn_two["model_calls"] == 1
    assert usage["session"] == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 129,
        "cached_tokens": 2,
        "model_calls": 5,
        "tool_count": 2,
        "fallback_count": 1,
        "unreported_usage_calls": 1,
        "turn_count": 2,
        "turn_wall_time_ms": 100,
    }


def test_a_metric_with_the_same_key_replaces_the_first_in_place(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.append_usage(session_id, metric("chat:1:1", total_tokens=1))
    store.append_usage(session_id, metric("chat:1:2", total_tokens=2))
    created = store.usage_summary(session_id)["calls"][0]["created_at"]
    store.append_usage(session_id, metric("chat:1:1", total_tokens=10, ttft_ms=5))
    calls = store.usage_summary(session_id)["calls"]
    assert [(call["metric_key"], call["total_tokens"]) for call in calls] == [
        ("chat:1:1", 10),
        ("chat:1:2", 2),
    ]
    assert calls[0]["ttft_ms"] == 5 and calls[0]["created_at"] == created
    assert store.usage_summary(session_id)["session"]["total_tokens"] == 12


def test_metrics_are_per_session(store: SessionStore) -> None:
    first, second = _new_session(store), _new_session(store)
    store.append_usage(first, metric("chat:1:1", total_tokens=1))
    store.append_usage(second, metric("chat:1:1", total_tokens=2))
    assert store.usage_summary(first)["session"]["total_tokens"] == 1
    assert store.usage_summary(second)["session"]["total_tokens"] == 2


def test_usage_summary_of_an_empty_session(store: SessionStore) -> None:
    usage = store.usage_summary(_new_session(store))
    assert usage["calls"] == [] and usage["turns"] == []
    assert usage["session"]["turn_count"] == 0 and usage["session"]["total_tokens"] == 0


# --------------------------------------------------------------- tool journal


def _direct_batch(store: SessionStore, session_id: str) -> tuple[str, list[Any], ChatMessage]:
    events = [call("c1", value=1), call("c2", value=2)]
    message = assistant("let me check", *events)
    batch_id = store.begin_batch(
        session_id,
        1,
        1,
        scope=f"{session_id}:turn-1:round-1",
        mode="chat_agent_tools",
        events=events,
        assistant=message,
    )
    return batch_id, events, message


def test_a_pending_batch_is_journaled_but_not_visible(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.append_message(session_id, 1, user("hi"))
    batch_id, events, message = _direct_batch(store, session_id)
    assert [m["role"] for m in store.list_messages(session_id)] == ["user"]
    [batch] = store.list_batches(session_id)
    assert batch["id"] == batch_id and batch["state"] == "pending"
    assert (batch["turn_index"], batch["round_index"], batch["mode"]) == (
        1,
        1,
        "chat_agent_tools",
    )
    assert batch["assistant"] == message.model_dump()
    assert [c["event"] for c in batch["calls"]] == [event.model_dump() for event in events]
    assert [c["state"] for c in batch["calls"]] == ["pending", "pending"]
    assert [c["position"] for c in batch["calls"]] == [0, 1]


def test_results_land_in_the_journal_and_commit_makes_the_batch_visible(
    store: SessionStore,
) -> None:
    session_id = _new_session(store)
    store.append_message(session_id, 1, user("hi"))
    batch_id, events, message = _direct_batch(store, session_id)
    replies = [tool_reply(event, f'{{"n": {i}}}') for i, event in enumerate(events)]
    store.record_result(batch_id, "c2", "failed", replies[1])
    store.record_result(batch_id, "c1", "succeeded", replies[0])
    assert len(store.list_messages(session_id)) == 1
    store.commit_batch(batch_id, [message, *replies])
    listed = store.list_messages(session_id)
    assert [(m["seq"], m["role"], m["tool_call_id"]) for m in listed] == [
        (1, "user", None),
        (2, "assistant", None),
        (3, "tool", "c1"),
        (4, "tool", "c2"),
    ]
    assert [c["id"] for c in listed[1]["tool_calls"]] == ["c1", "c2"]
    [batch] = store.list_batches(session_id)
    assert batch["state"] == "committed" and batch["finished_at"] is not None
    assert [c["state"] for c in batch["calls"]] == ["succeeded", "failed"]
    assert batch["calls"][0]["result"] == replies[0].model_dump()
    with pytest.raises(UsageError, match="already committed"):
        store.commit_batch(batch_id, [])
    with pytest.raises(UsageError, match="already committed"):
        store.record_result(batch_id, "c1", "succeeded", replies[0])


def test_begin_batch_appends_visible_messages_in_the_same_write(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.append_message(session_id, 1, user("plan my day"))
    batch_id = store.begin_batch(
        session_id,
        1,
        1,
        scope="s:round-1",
        mode="dual_agent",
        events=[call("e1", "handoff_note")],
        visible=[assistant("Sure, noting that.")],
    )
    assert [m["content"] for m in store.list_messages(session_id)] == [
        "plan my day",
        "Sure, noting that.",
    ]
    store.commit_batch(batch_id, [ChatMessage(role="user", name="event_agent", content="r")])
    assert [m["name"] for m in store.list_messages(session_id)] == [None, None, "event_agent"]


def test_abandon_marks_unfinished_calls_cancelled_and_keeps_transcript(
    store: SessionStore,
) -> None:
    session_id = _new_session(store)
    store.append_message(session_id, 1, user("hi"))
    batch_id, events, _ = _direct_batch(store, session_id)
    store.record_result(batch_id, "c1", "succeeded", tool_reply(events[0]))
    store.abandon_batch(batch_id)
    [batch] = store.list_batches(session_id)
    assert batch["state"] == "cancelled"
    assert [c["state"] for c in batch["calls"]] == ["succeeded", "cancelled"]
    assert batch["calls"][1]["result"] is None
    assert [m["role"] for m in store.list_messages(session_id)] == ["user"]
    store.abandon_batch(batch_id, "failed")  # no longer pending: left as it is
    assert store.list_batches(session_id)[0]["state"] == "cancelled"
    with pytest.raises(UsageError, match="already cancelled"):
        store.commit_batch(batch_id, [])


def test_abandon_as_failed(store: SessionStore) -> None:
    session_id = _new_session(store)
    batch_id, _, _ = _direct_batch(store, session_id)
    store.abandon_batch(batch_id, "failed")
    [batch] = store.list_batches(session_id)
    assert batch["state"] == "failed"
    assert {c["state"] for c in batch["calls"]} == {"cancelled"}


def test_include_pending_renders_uncommitted_batches_after_committed_messages(
    store: SessionStore,
) -> None:
    session_id = _new_session(store)
    store.append_message(session_id, 1, user("hi"))
    cancelled, events, _ = _direct_batch(store, session_id)
    store.record_result(cancelled, "c1", "succeeded", tool_reply(events[0]))
    store.abandon_batch(cancelled)
    pending, events, _ = _direct_batch(store, session_id)
    store.record_result(pending, "c2", "succeeded", tool_reply(events[1]))
    store.append_message(session_id, 1, assistant("after"))
    listed = store.list_messages(session_id, include_pending=True)
    assert [(m["role"], m["state"], m["seq"], m["tool_call_id"]) for m in listed] == [
        ("user", "committed", 1, None),
        ("assistant", "committed", 2, None),
        ("assistant", "cancelled", None, None),
        ("tool", "cancelled", None, "c1"),
        ("assistant", "pending", None, None),
        ("tool", "pending", None, "c2"),
    ]
    assert all(set(m) == MESSAGE_KEYS | {"state"} for m in listed)
    assert listed[2]["tool_calls"][0]["id"] == "c1"
    assert "state" not in store.list_messages(session_id)[0]


def test_journal_misuse_is_a_usage_error(store: SessionStore) -> None:
    session_id = _new_session(store)
    batch_id, events, _ = _direct_batch(store, session_id)
    with pytest.raises(UsageError, match="twice"):
        store.begin_batch(
            session_id, 1, 2, scope="x", mode="dual_agent", events=[call("d"), call("d")]
        )
    assert len(store.list_batches(session_id)) == 1
    with pytest.raises(UsageError, match="no call 'zzz'"):
        store.record_result(batch_id, "zzz", "succeeded", tool_reply(events[0]))
    with pytest.raises(UsageError, match="status"):
        store.record_result(batch_id, "c1", "done", tool_reply(events[0]))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown tool batch"):
        store.commit_batch("nope", [])
    with pytest.raises(UsageError, match="unknown tool batch"):
        store.abandon_batch("nope")
    with pytest.raises(UsageError, match="abandoned as"):
        store.abandon_batch(batch_id, "committed")


def test_batches_list_oldest_first(store: SessionStore) -> None:
    session_id = _new_session(store)
    ids = [_direct_batch(store, session_id)[0] for _ in range(3)]
    assert [batch["id"] for batch in store.list_batches(session_id)] == ids


# --------------------------------------------------------------------- claims


def test_one_claim_per_session(store_factory: StoreFactory) -> None:
    first, second = store_factory(), store_factory()
    session_id = _new_session(first)
    token = first.claim_session(session_id, "runtime-a")
    with pytest.raises(SessionBusy, match="runtime-a") as raised:
        second.claim_session(session_id, "runtime-b")
    assert raised.value.session_id == session_id
    with pytest.raises(SessionBusy):
        first.claim_session(session_id, "runtime-a-again")  # same process, other runtime
    other = _new_session(first)
    second.claim_session(other, "runtime-b")  # claims are per session
    first.release_claim(session_id, "not-the-token")
    with pytest.raises(SessionBusy):
        second.claim_session(session_id, "runtime-b")
    first.release_claim(session_id, token)
    second.claim_session(session_id, "runtime-b")


def test_renew_extends_and_a_lost_claim_is_busy(store: SessionStore) -> None:
    session_id = _new_session(store)
    token = store.claim_session(session_id, "a", lease_seconds=0.2)
    store.renew_claim(session_id, token, lease_seconds=30)
    threading.Event().wait(0.3)
    with pytest.raises(SessionBusy):
        store.claim_session(session_id, "b")
    store.release_claim(session_id, token)
    with pytest.raises(SessionBusy, match="released or taken over"):
        store.renew_claim(session_id, token)
    new = store.claim_session(session_id, "b")
    with pytest.raises(SessionBusy, match="b, pid"):
        store.renew_claim(session_id, token)
    store.renew_claim(session_id, new)


def test_expired_claims_are_taken_over(store: SessionStore) -> None:
    session_id = _new_session(store)
    old = store.claim_session(session_id, "a", lease_seconds=0.05)
    threading.Event().wait(0.1)
    new = store.claim_session(session_id, "b")
    assert new != old
    with pytest.raises(SessionBusy):
        store.renew_claim(session_id, old)


def test_claim_waits_for_the_holder_to_release(store_factory: StoreFactory) -> None:
    first, second = store_factory(), store_factory()
    session_id = _new_session(first)
    token = first.claim_session(session_id, "a")
    timer = threading.Timer(0.2, first.release_claim, (session_id, token))
    timer.start()
    try:
        assert second.claim_session(session_id, "b", wait_seconds=5)
    finally:
        timer.cancel()


def test_claim_gives_up_after_wait_seconds(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.claim_session(session_id, "a")
    with pytest.raises(SessionBusy):
        store.claim_session(session_id, "b", wait_seconds=0.15)


@pytest.mark.parametrize("lease", [0, -1, float("nan"), float("inf")])
def test_claim_rejects_bad_leases(store: SessionStore, lease: float) -> None:
    session_id = _new_session(store)
    with pytest.raises(UsageError, match="lease_seconds"):
        store.claim_session(session_id, "a", lease_seconds=lease)


def test_a_new_claim_cancels_batches_left_pending(store: SessionStore) -> None:
    session_id = _new_session(store)
    token = store.claim_session(session_id, "crashed runtime")
    store.append_message(session_id, 1, user("hi"))
    batch_id, events, _ = _direct_batch(store, session_id)
    store.record_result(batch_id, "c1", "succeeded", tool_reply(events[0]))
    store.release_claim(session_id, token)  # or it expired, or its process died
    store.claim_session(session_id, "next runtime")
    [batch] = store.list_batches(session_id)
    assert batch["state"] == "cancelled"
    assert [c["state"] for c in batch["calls"]] == ["succeeded", "cancelled"]
    assert [m["role"] for m in store.list_messages(session_id)] == ["user"]


# ------------------------------------------------------------------- lifecycle


def test_closed_stores_refuse_calls(store_factory: StoreFactory) -> None:
    store = store_factory()
    session_id = _new_session(store)
    store.close()
    store.close()
    with pytest.raises(UsageError, match="closed"):
        store.get_session(session_id)
    with pytest.raises(UsageError, match="closed"):
        store.append_message(session_id, 1, user("x"))


def test_context_manager_closes(tmp_path: Any) -> None:
    for store in (SQLiteSessionStore(tmp_path / "cm.sqlite3"), InMemorySessionStore()):
        with store as opened:
            assert opened is store
            opened.create_session("t", {})
        with pytest.raises(UsageError):
            store.list_sessions()


def test_concurrent_threads_write_many_sessions(store: SessionStore) -> None:
    sessions = [_new_session(store) for _ in range(6)]
    errors: list[BaseException] = []

    def worker(session_id: str) -> None:
        try:
            for turn in range(1, 21):
                store.start_turn(session_id, turn, f"m{turn}")
                store.append_messages(session_id, turn, [user(f"u{turn}"), assistant("a")])
                store.append_audit(session_id, turn, "turn_completed", {"t": turn})
                store.append_usage(session_id, metric(f"chat:{turn}:1", total_tokens=1))
                store.complete_turn(session_id, turn, wall_time_ms=1)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for session_id in sessions:
        assert [m["seq"] for m in store.list_messages(session_id)] == list(range(1, 41))
        assert store.usage_summary(session_id)["session"]["total_tokens"] == 20
        assert store.next_turn_index(session_id) == 21


# -------------------------------------------------------------------- parity


def _scripted_session(store: SessionStore) -> dict[str, Any]:
    session_id = store.create_session(" parity  check ", {"tool_invocation_mode": "dual_agent"})
    store.start_turn(session_id, 1, "go")
    store.append_message(session_id, 1, user("go"))
    store.append_audit(session_id, 1, "turn_started", {"turn_elapsed_ms": 0})
    events = [call("e1"), call("e2", "other")]
    done = store.begin_batch(
        session_id, 1, 1, scope="p:round-1", mode="dual_agent", events=events,
        visible=[assistant("on it")],
    )  # fmt: skip
    store.record_result(done, "e1", "succeeded", tool_reply(events[0]))
    store.record_result(done, "e2", "failed", tool_reply(events[1], "boom"))
    store.commit_batch(done, [ChatMessage(role="user", name="event_agent", content="results")])
    left = store.begin_batch(session_id, 1, 2, scope="p:round-2", mode="dual_agent",
                             events=[call("e3")])  # fmt: skip
    store.record_result(left, "e3", "succeeded", tool_reply(call("e3")))
    store.abandon_batch(left, "failed")
    store.append_usages(session_id, [metric("chat:1:1", total_tokens=5),
                                     metric("tool:1:1:e1", tool_latency_ms=3)])  # fmt: skip
    store.append_usage(session_id, metric("chat:1:1", total_tokens=6))
    store.complete_turn(session_id, 1, wall_time_ms=9, round_count=2)
    return {
        "session": store.get_session(session_id),
        "sessions": store.list_sessions(),
        "messages": store.list_messages(session_id, include_pending=True),
        "audits": [{**a, "id": 0} for a in store.list_audit_logs(session_id)],
        "usage": store.usage_summary(session_id),
        "batches": store.list_batches(session_id),
        "next_turn": store.next_turn_index(session_id),
    }


def test_sqlite_and_memory_stores_give_identical_results(tmp_path: Any) -> None:
    with SQLiteSessionStore(tmp_path / f"{uuid.uuid4().hex}.sqlite3") as sqlite_store:
        from_sqlite = _scripted_session(sqlite_store)
    with InMemorySessionStore() as memory_store:
        from_memory = _scripted_session(memory_store)
    assert _strip_volatile(from_sqlite) == _strip_volatile(from_memory)
    assert list(from_sqlite["usage"]["calls"][0]) == list(from_memory["usage"]["calls"][0])
    assert list(from_sqlite["messages"][0]) == list(from_memory["messages"][0])


def test_a_turn_starts_together_with_its_user_message(store: SessionStore) -> None:
    session_id = _new_session(store)
    store.start_turn(session_id, 1, "hello", messages=[user("hello")])
    assert [
        (m["turn_index"], m["role"], m["content"]) for m in store.list_messages(session_id)
    ] == [(1, "user", "hello")]
    with pytest.raises(UsageError):
        store.start_turn(session_id, 1, "again", messages=[user("again")])
    assert [m["content"] for m in store.list_messages(session_id)] == ["hello"]
