"""What a session's writes ask of SQLite: a new session and its claim are one
transaction of two inserts, a turn is inserted without a lookup first, and the checks
they skip still hold for a session that was already there (a real SQLite file; the
statements traced with ``set_trace_callback``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_lab.domain.errors import SessionBusy, UsageError
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


@contextmanager
def _traced(store: SQLiteSessionStore) -> Iterator[list[str]]:
    conn = store._conn
    assert conn is not None
    statements: list[str] = []
    trace: Callable[[str], None] = lambda text: statements.append(text.split()[0].upper())  # noqa: E731
    conn.set_trace_callback(trace)
    try:
        yield statements
    finally:
        conn.set_trace_callback(None)


def test_a_new_session_and_its_claim_are_two_inserts_in_one_transaction(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        with _traced(store) as statements, store.atomic_writes():
            session = store.ensure_session("s1", "  Hello   there ", {"mode": "x"})
            token = store.claim_session("s1", "runtime")

        assert statements == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
        assert session == store.get_session("s1")  # the summary is what was stored
        assert session["title"] == "Hello there" and session["config"] == {"mode": "x"}
        assert (session["turn_count"], session["message_count"]) == (0, 0)
        store.start_turn("s1", 1, "Hi")  # the claim holds: the fenced write goes through
        store.release_claim("s1", token)


def test_a_session_that_was_there_is_read_back_and_its_claim_checked(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with SQLiteSessionStore(path) as first, SQLiteSessionStore(path) as second:
        first.ensure_session("s1", "Hello", {"mode": "first"})
        first.claim_session("s1", "first runtime")
        with second.atomic_writes():
            session = second.ensure_session("s1", "Other", {"mode": "second"})
        assert session["config"] == {"mode": "first"}
        with pytest.raises(SessionBusy), second.atomic_writes():
            second.ensure_session("s1", "Other", {})
            second.claim_session("s1", "second runtime")


def test_a_turn_that_exists_is_refused_without_a_lookup_first(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        store.ensure_session("s1", "Hello", {})
        store.start_turn("s1", 1, "Hi")
        with _traced(store) as statements, pytest.raises(UsageError, match="already exists"):
            store.start_turn("s1", 1, "Hi again")
        # the session's check, the insert that finds the turn there, and nothing kept
        assert statements == ["BEGIN", "SELECT", "INSERT", "ROLLBACK"]
        assert store.list_turns("s1")[0]["user_message"] == "Hi"
