"""The PostgreSQL schema: the SQLite store's version, and migrations from older ones."""

from __future__ import annotations

import json

import psycopg
import pytest

from agent_lab.domain.errors import StoreFormatError
from agent_lab.infrastructure.postgres import schema
from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from agent_lab.infrastructure.sqlite import schema as sqlite_schema
from tests.store_conformance.conformance_support import PostgresBackend, call, tool_reply


def _stored_version(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version FROM agent_lab_schema").fetchone()
    assert row is not None
    return int(row[0])


def test_a_new_database_gets_the_sqlite_stores_schema_version(postgres: PostgresBackend) -> None:
    postgres.open()
    assert _stored_version(postgres.url) == schema.SCHEMA_VERSION == sqlite_schema.SCHEMA_VERSION


def test_a_newer_schema_is_refused_and_left_unchanged(postgres: PostgresBackend) -> None:
    postgres.open()
    newer = schema.SCHEMA_VERSION + 1
    with psycopg.connect(postgres.url) as conn:
        conn.execute("UPDATE agent_lab_schema SET version = %s", (newer,))
    with pytest.raises(StoreFormatError, match=f"version {newer}"):
        PostgresSessionStore(postgres.url)
    assert _stored_version(postgres.url) == newer


def _version_one_database(url: str) -> None:
    """A database as the first PostgreSQL store wrote it, before the effect ledger."""
    with psycopg.connect(url) as conn:
        for statement in schema.MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute("UPDATE agent_lab_schema SET version = 1")
        conn.execute(
            "INSERT INTO sessions (id, title, config, created_at, updated_at)"
            " VALUES ('old', 'old', '{}', 'then', 'then')"
        )
        conn.execute(
            "INSERT INTO turns (session_id, turn_index, status, user_message, started_at)"
            " VALUES ('old', 1, 'running', 'hi', 'then')"
        )
        for batch_id, seq, state in (
            ("crashed", 1, "pending"),
            ("stopped", 2, "cancelled"),
            ("done", 3, "committed"),
        ):
            conn.execute(
                "INSERT INTO tool_batches (seq, id, session_id, turn_index, round_index, scope,"
                " mode, state, created_at)"
                " VALUES (%s, %s, 'old', 1, %s, %s, 'dual_agent', %s, 'then')",
                (seq, batch_id, seq, f"old:turn-1:round-{seq}", state),
            )
        reply = json.dumps(tool_reply(call("r")).model_dump())
        for batch_id, position, event_id, state, result in (
            ("crashed", 0, "open", "pending", None),
            ("crashed", 1, "answered", "succeeded", reply),
            ("stopped", 0, "cut", "cancelled", None),
            ("done", 0, "fine", "succeeded", reply),
        ):
            conn.execute(
                "INSERT INTO tool_calls (batch_id, position, event, event_id, state, result)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (batch_id, position, json.dumps(call(event_id).model_dump()), event_id)
                + (state, result),
            )


def test_a_version_one_database_is_migrated_without_claiming_what_it_cannot_know(
    postgres: PostgresBackend,
) -> None:
    """Before the ledger a call without a result may or may not have run."""
    _version_one_database(postgres.url)
    store = postgres.open()

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
    assert _stored_version(postgres.url) == schema.SCHEMA_VERSION == 4


def test_the_migrated_state_check_admits_the_ledger_states_only(
    postgres: PostgresBackend,
) -> None:
    _version_one_database(postgres.url)
    postgres.open()
    with psycopg.connect(postgres.url) as conn:
        conn.execute("UPDATE tool_calls SET state = 'dispatched' WHERE event_id = 'fine'")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE tool_calls SET state = 'running' WHERE event_id = 'fine'")
