"""SQLite-specific behaviour: the file, its schema, reopening, processes and threads."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import StoreFormatError, UsageError
from agent_lab.infrastructure.sqlite import schema as _sqlite_schema
from agent_lab.infrastructure.sqlite.schema import APPLICATION_ID, SCHEMA_VERSION
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import assistant, call, metric, tool_reply, user

TABLES = (
    "sessions",
    "turns",
    "messages",
    "audit_logs",
    "call_metrics",
    "tool_batches",
    "tool_calls",
    "session_claims",
)


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _pragma(path: Path, name: str) -> Any:
    conn = _raw(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def _snapshot(store: SessionStore, session_id: str) -> dict[str, Any]:
    return {
        "session": store.get_session(session_id),
        "messages": store.list_messages(session_id, include_pending=True),
        "audits": store.list_audit_logs(session_id),
        "usage": store.usage_summary(session_id),
        "batches": store.list_batches(session_id),
    }


def _populate(store: SessionStore) -> str:
    session_id = store.create_session("persisted", {"tool_invocation_mode": "chat_agent_tools"})
    store.start_turn(session_id, 1, "hi")
    store.append_message(session_id, 1, user("hi"))
    event = call("c1", value=1)
    batch = store.begin_batch(
        session_id, 1, 1, scope="s:round-1", mode="chat_agent_tools", events=[event],
        assistant=assistant("", event),
    )  # fmt: skip
    store.record_result(batch, "c1", "succeeded", tool_reply(event))
    store.commit_batch(batch, [assistant("", event), tool_reply(event)])
    store.append_audit(session_id, 1, "turn_completed", {"turn_elapsed_ms": 5})
    store.append_usage(session_id, metric("chat:1:1", total_tokens=9))
    store.complete_turn(session_id, 1, wall_time_ms=5, round_count=2)
    return session_id


# ---------------------------------------------------------------- the file


def test_everything_survives_close_and_reopen(sqlite_path: Path) -> None:
    with SQLiteSessionStore(sqlite_path) as store:
        session_id = _populate(store)
        before = _snapshot(store, session_id)
    with SQLiteSessionStore(sqlite_path) as reopened:
        assert _snapshot(reopened, session_id) == before
        assert reopened.next_turn_index(session_id) == 2


def test_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "store.sqlite3"
    with SQLiteSessionStore(path) as store:
        assert store.path == path
        assert "open" in repr(store)
    assert path.is_file()


def test_new_file_is_a_wal_store_at_the_current_schema(sqlite_path: Path) -> None:
    SQLiteSessionStore(sqlite_path).close()
    assert _pragma(sqlite_path, "journal_mode") == "wal"
    assert _pragma(sqlite_path, "user_version") == SCHEMA_VERSION
    assert _pragma(sqlite_path, "application_id") == APPLICATION_ID
    conn = _raw(sqlite_path)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    conn.close()
    assert set(TABLES) <= names


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch()
    with SQLiteSessionStore(path) as store:
        store.create_session("t", {})
    assert _pragma(path, "user_version") == SCHEMA_VERSION


@pytest.mark.parametrize(
    "content",
    [
        b"this is a text file, not a database\n" * 50,
        os.urandom(8192),
        b"SQLite format 3\x00" + b"\xff" * 8176,
    ],
    ids=["text", "random", "bad-sqlite-header"],
)
def test_a_file_that_is_not_a_database_is_refused_and_left_unchanged(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.sqlite3"
    path.write_bytes(content)
    with pytest.raises(StoreFormatError, match=str(path)):
        SQLiteSessionStore(path)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite3"]


def test_another_applications_database_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = _raw(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.close()
    content = path.read_bytes()
    with pytest.raises(StoreFormatError, match="another application"):
        SQLiteSessionStore(path)
    assert path.read_bytes() == content
    assert _pragma(path, "journal_mode") == "delete"


def test_a_newer_schema_is_refused_naming_file_and_versions(sqlite_path: Path) -> None:
    SQLiteSessionStore(sqlite_path).close()
    conn = _raw(sqlite_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    content = sqlite_path.read_bytes()
    with pytest.raises(StoreFormatError) as raised:
        SQLiteSessionStore(sqlite_path)
    message = str(raised.value)
    assert str(sqlite_path) in message
    assert f"version {SCHEMA_VERSION + 1}" in message and f"up to {SCHEMA_VERSION}" in message
    assert sqlite_path.read_bytes() == content


def test_forward_migrations_run_in_order_and_keep_data(
    sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SQLiteSessionStore(sqlite_path) as store:
        session_id = _populate(store)
    upgraded = SCHEMA_VERSION + 1
    monkeypatch.setitem(
        _sqlite_schema.MIGRATIONS,
        upgraded,
        ("CREATE TABLE notes (session_id TEXT, body TEXT)", "ALTER TABLE turns ADD COLUMN x"),
    )
    monkeypatch.setattr(_sqlite_schema, "SCHEMA_VERSION", upgraded)
    conn = _raw(sqlite_path)
    try:
        assert _sqlite_schema.migrate(conn, sqlite_path) == upgraded
        assert _sqlite_schema.migrate(conn, sqlite_path) == upgraded  # idempotent
        assert conn.execute("PRAGMA user_version").fetchone()[0] == upgraded
        assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 3
    finally:
        conn.close()
    assert _pragma(sqlite_path, "user_version") == upgraded
    del session_id


def test_a_failed_migration_leaves_the_previous_version(
    sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SQLiteSessionStore(sqlite_path).close()
    upgraded = SCHEMA_VERSION + 1
    monkeypatch.setitem(
        _sqlite_schema.MIGRATIONS,
        upgraded,
        ("CREATE TABLE notes (body TEXT)", "THIS IS NOT SQL"),
    )
    monkeypatch.setattr(_sqlite_schema, "SCHEMA_VERSION", upgraded)
    conn = _raw(sqlite_path)
    try:
        with pytest.raises(sqlite3.OperationalError):
            _sqlite_schema.migrate(conn, sqlite_path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == upgraded - 1
        tables = conn.execute("SELECT name FROM sqlite_schema WHERE name = 'notes'").fetchall()
        assert tables == []
    finally:
        conn.close()


def test_many_stores_opening_a_new_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "race.sqlite3"
    stores: list[SQLiteSessionStore] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_store() -> None:
        barrier.wait()
        try:
            stores.append(SQLiteSessionStore(path))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stores[0].create_session("t", {}, session_id="s")
    assert all(store.get_session("s") is not None for store in stores)
    for store in stores:
        store.close()


@pytest.mark.parametrize(
    "options",
    [
        {"busy_timeout_ms": -1},
        {"synchronous": "SOMETIMES"},
        {"max_size_bytes": 0},
    ],
)
def test_bad_options_are_usage_errors(sqlite_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        SQLiteSessionStore(sqlite_path, **options)
    assert not sqlite_path.exists()


@pytest.mark.parametrize("level", ["OFF", "NORMAL", "FULL", "EXTRA", "full"])
def test_every_synchronous_level_opens(tmp_path: Path, level: Any) -> None:
    with SQLiteSessionStore(tmp_path / f"{level}.sqlite3", synchronous=level) as store:
        store.create_session("t", {})


def test_read_only_store_reads_a_live_store(sqlite_path: Path) -> None:
    with SQLiteSessionStore(sqlite_path) as writer:
        session_id = _populate(writer)
        with SQLiteSessionStore(sqlite_path, read_only=True) as reader:
            assert _snapshot(reader, session_id) == _snapshot(writer, session_id)
            writer.append_message(session_id, 2, user("new"))
            assert reader.list_messages(session_id)[-1]["content"] == "new"


def test_read_only_store_needs_an_existing_file(sqlite_path: Path) -> None:
    with pytest.raises(StoreFormatError, match="no session store"):
        SQLiteSessionStore(sqlite_path, read_only=True)
    assert not sqlite_path.exists()


def test_delete_session_leaves_no_orphan_rows(sqlite_path: Path) -> None:
    with SQLiteSessionStore(sqlite_path) as store:
        session_id = _populate(store)
        store.claim_session(session_id, "r", lease_seconds=0.2)
        time.sleep(0.4)  # a live claim keeps the session; an expired one does not
        store.delete_session(session_id)
    conn = _raw(sqlite_path)
    try:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()
    assert counts == dict.fromkeys(TABLES, 0)


def test_ids_and_text_are_bound_as_parameters(sqlite_path: Path) -> None:
    hostile = "x'); DROP TABLE sessions; --"
    with SQLiteSessionStore(sqlite_path) as store:
        store.create_session(hostile, {"q": hostile}, session_id=hostile)
        store.append_audit(hostile, None, hostile, {hostile: hostile})
        assert store.get_session(hostile)["config"] == {"q": hostile}  # type: ignore[index]
        assert store.list_audit_logs(hostile)[0]["event"] == hostile


# ------------------------------------------------------------- concurrency


def test_two_stores_on_one_file_append_to_one_session_without_gaps(sqlite_path: Path) -> None:
    stores = [SQLiteSessionStore(sqlite_path) for _ in range(2)]
    session_id = stores[0].create_session("shared", {})
    errors: list[BaseException] = []

    def writer(store: SQLiteSessionStore, name: str) -> None:
        try:
            for i in range(40):
                store.append_messages(session_id, 1, [user(f"{name}{i}"), assistant(name)])
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(store, name))
        for store, name in zip(stores * 2, "abcd", strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    messages = stores[1].list_messages(session_id)
    assert [m["seq"] for m in messages] == list(range(1, 321))
    pairs = list(zip(messages[::2], messages[1::2], strict=True))
    assert all(first["content"][0] == second["content"] for first, second in pairs)
    for store in stores:
        store.close()


# ------------------------------------------------------------ process death

_WRITER = """
import sys
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

store = SQLiteSessionStore(sys.argv[1])
session_id = store.ensure_session("crash", "crash", {})["id"]
store.claim_session(session_id, "writer")
turn = store.next_turn_index(session_id)
print("ready", flush=True)
while True:
    store.start_turn(session_id, turn, "u")
    store.append_messages(
        session_id, turn,
        [ChatMessage(role="user", content=f"u{turn}"),
         ChatMessage(role="assistant", content=f"a{turn}")],
    )
    event = ToolCallEvent(id=f"c{turn}", name="t")
    batch = store.begin_batch(session_id, turn, 1, scope=f"s{turn}", mode="chat_agent_tools",
                              events=[event], assistant=ChatMessage(role="assistant",
                              tool_calls=[event]))
    store.record_result(batch, event.id, "succeeded",
                        ChatMessage(role="tool", content="r", tool_call_id=event.id, name="t"))
    store.commit_batch(batch, [ChatMessage(role="assistant", tool_calls=[event]),
                               ChatMessage(role="tool", content="r", tool_call_id=event.id,
                                           name="t")])
    store.complete_turn(session_id, turn, wall_time_ms=1)
    turn += 1
"""


def _check_crash_invariants(path: Path) -> int:
    with SQLiteSessionStore(path) as store:
        messages = store.list_messages("crash")
        assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
        by_turn: dict[int, list[str]] = {}
        for message in messages:
            by_turn.setdefault(message["turn_index"], []).append(message["role"])
        # Each write is atomic: a turn holds its user/assistant pair, then maybe the
        # whole committed batch, never a part of either.
        for roles in by_turn.values():
            assert roles in (["user", "assistant"], ["user", "assistant", "assistant", "tool"])
        # The killed writer's claim is taken over at once; its pending batch cancelled.
        token = store.claim_session("crash", "inspector")
        assert all(batch["state"] != "pending" for batch in store.list_batches("crash"))
        assert store.list_messages("crash", include_pending=False) == messages
        store.release_claim("crash", token)
    conn = _raw(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    return len(messages)


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
def test_sigkill_at_random_points_loses_no_commit_and_leaves_no_partial_write(
    tmp_path: Path, synchronous: str
) -> None:
    path = tmp_path / f"crash-{synchronous}.sqlite3"
    code = _WRITER.replace(
        "SQLiteSessionStore(sys.argv[1])",
        f"SQLiteSessionStore(sys.argv[1], synchronous={synchronous!r})",
    )
    rng = random.Random(7)
    previous = 0
    for _ in range(5):
        process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.3))
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stdout.close()
        count = _check_crash_invariants(path)
        assert count >= previous  # nothing committed earlier was lost
        previous = count
    assert previous > 0
