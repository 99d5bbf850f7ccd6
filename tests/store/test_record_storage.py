"""Failure reasons are persisted; request audits keep each message once; huge values
are capped visibly; a version-1 file is migrated forward with its data."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from store_support import StoreFactory, assistant, user

from agent_lab.application.session_store import SessionStore
from agent_lab.infrastructure.sqlite import schema
from agent_lab.infrastructure.sqlite.blobs import CAP_CHARS, CAP_KEY, HEAD_CHARS
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


def test_failure_reason_and_message_are_stored_and_listed(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.create_session("fails", {}, session_id="s")
    store.start_turn("s", 1, "first")
    store.complete_turn(
        "s",
        1,
        status="failed",
        wall_time_ms=12,
        round_count=1,
        failure_reason="session_persistence_failed:locked",
        failure_message="the session storage is busy",
    )
    store.start_turn("s", 2, "second")
    store.complete_turn("s", 2)
    first, second = store.list_turns("s")
    assert (first["status"], first["failure_reason"], first["failure_message"]) == (
        "failed",
        "session_persistence_failed:locked",
        "the session storage is busy",
    )
    assert (second["failure_reason"], second["failure_message"]) == (None, None)
    summary_turn = store.usage_summary("s")["turns"][0]
    assert summary_turn["failure_reason"] == "session_persistence_failed:locked"
    assert summary_turn["failure_message"] == "the session storage is busy"


def test_failure_reasons_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "reasons.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("fails", {}, session_id="s")
        store.start_turn("s", 1, "first")
        store.complete_turn("s", 1, status="failed", failure_reason="provider_error:http_500")
    with SQLiteSessionStore(path) as reopened:
        assert reopened.list_turns("s")[0]["failure_reason"] == "provider_error:http_500"


def _version_one_file(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in schema.MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at)"
        " VALUES ('old', 'old', '{}', 'then', 'then')"
    )
    conn.execute(
        "INSERT INTO turns (session_id, turn_index, status, user_message, started_at)"
        " VALUES ('old', 1, 'completed', 'hi', 'then')"
    )
    conn.execute(
        "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
        " VALUES ('old', 1, 'chat_agent_request', ?, 'then')",
        (json.dumps({"messages": [{"role": "user", "content": "hi"}]}),),
    )
    conn.close()


def test_a_version_one_file_is_migrated_forward_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    _version_one_file(path)
    with SQLiteSessionStore(path) as store:
        turn = store.list_turns("old")[0]
        assert (turn["status"], turn["failure_reason"]) == ("completed", None)
        audit = store.list_audit_logs("old")[0]
        assert audit["details"] == {"messages": [{"role": "user", "content": "hi"}]}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    conn.close()


def _request(messages: list[dict[str, Any]], round_index: int) -> dict[str, Any]:
    return {
        "agent": "chat_agent",
        "round_index": round_index,
        "tools": [{"type": "function", "function": {"name": "lookup", "doc": "d" * 400}}],
        "messages": messages,
        "history": [m for m in messages if m["role"] != "system"],
        "raw_chunks": [{"id": f"chunk-{round_index}", "pad": "p" * 300}],
        "empty": [],
        "note": None,
    }


def _grow(store: SessionStore, turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help. " * 40}]
    appended = []
    for turn in range(1, turns + 1):
        history.append(user(f"question {turn} " + "q" * 300).model_dump())
        appended.append(_request(list(history), turn))
        history.append(assistant(f"answer {turn} " + "a" * 300).model_dump())
        # fresh dicts, with an event catalog after the system prompt (it comes and goes)
        catalog = {"role": "system", "content": "Available events: lookup. " * 20}
        appended.append(_request([history[0], catalog, *[dict(m) for m in history[1:]]], turn))
    store.append_audits("s", [(i, "chat_agent_request", d) for i, d in enumerate(appended)])
    return appended


def test_request_audits_round_trip_exactly(store: SessionStore) -> None:
    store.create_session("audits", {}, session_id="s")
    appended = _grow(store, 30)
    listed = store.list_audit_logs("s")
    assert [record["details"] for record in listed] == appended
    tail = store.list_audit_logs("s", after_id=listed[-3]["id"])
    assert [record["details"] for record in tail] == appended[-2:]


def test_request_audits_store_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "growth.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("audits", {}, session_id="s")
        appended = _grow(store, 100)
    verbatim = sum(len(json.dumps(details)) for details in appended)
    conn = sqlite3.connect(path)
    stored = sum(
        conn.execute(f"SELECT coalesce(sum({columns}), 0) FROM {table}").fetchone()[0]
        for table, columns in (
            ("audit_logs", "length(details)"),
            ("audit_blobs", "length(body) + length(hash)"),
            ("audit_lists", "length(hash) + length(parent) + length(item)"),
        )
    )
    blob_rows = conn.execute("SELECT count(*) FROM audit_blobs").fetchone()[0]
    conn.close()
    # 201 messages, the catalog and one tool schema: each stored once.
    assert blob_rows == 203
    assert stored * 20 < verbatim


def test_a_huge_value_is_capped_with_a_visible_marker(store: SessionStore) -> None:
    store.create_session("huge", {}, session_id="s")
    page = "x" * (CAP_CHARS + 10)
    message = {"role": "tool", "content": page, "tool_call_id": "c1"}
    store.append_audit("s", 1, "chat_agent_request", {"messages": [message], "result": page})
    store.start_turn("s", 1, "q", messages=[user(page)])
    details = store.list_audit_logs("s")[0]["details"]
    marker = {
        "original_chars": len(page),
        "sha256": hashlib.sha256(page.encode()).hexdigest(),
        "head": page[:HEAD_CHARS],
    }
    assert details["result"] == {CAP_KEY: marker}
    assert details["messages"][0]["content"] == {CAP_KEY: marker}
    assert details["messages"][0]["tool_call_id"] == "c1"
    assert store.list_messages("s")[0]["content"] == page  # the transcript keeps it whole


def test_deleting_a_session_removes_its_stored_values(tmp_path: Path) -> None:
    path = tmp_path / "deleted.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("audits", {}, session_id="s")
        _grow(store, 3)
        store.delete_session("s")
        store.create_session("audits", {}, session_id="s")
        appended = _grow(store, 2)  # the store must not assume the old values exist
        assert [r["details"] for r in store.list_audit_logs("s")] == appended
    conn = sqlite3.connect(path)
    # 5 messages, the catalog and 1 schema
    assert conn.execute("SELECT count(*) FROM audit_blobs").fetchone()[0] == 7
    conn.close()
