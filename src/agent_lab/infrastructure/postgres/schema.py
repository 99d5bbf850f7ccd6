"""The PostgreSQL store's schema, its version check and its forward migrations.

The tables mirror the SQLite store's (same columns, same meaning), in the connection's
``search_path`` schema. Timestamps are stored as the same ISO-8601 text and JSON values
as text, so both stores return identical dicts. The version lives in
``agent_lab_schema``; ``MIGRATIONS[n]`` turns version ``n - 1`` into ``n``, and the
versions are the SQLite store's: version ``n`` has the same tables and columns in both
stores. Never edit a released migration: append one and raise ``SCHEMA_VERSION``. Migrations
run in one transaction under a transaction-scoped advisory lock, so several workers
opening a new database at once migrate it once. A database that is up to date is
opened without writing to it (a read-only server or role can still read it).
"""

from __future__ import annotations

from typing import Final

import psycopg
from psycopg.rows import TupleRow

from agent_lab.domain.errors import StoreFormatError
from agent_lab.infrastructure.store_common.tables import (
    AUDIT_LOGS,
    AUDIT_LOGS_INDEX,
    CALL_METRICS,
    MESSAGES,
    POSTGRES_TYPES,
    TOOL_BATCHES,
    TOOL_BATCHES_INDEX,
    TOOL_CALLS_V1,
    render,
)

SCHEMA_VERSION: Final = 4
"""The newest schema this code reads and writes."""

MIGRATION_LOCK: Final = 0x41474C42
"""The advisory lock key of migrations (ASCII ``AGLB``, as SQLite's application id)."""

_V1: Final = (
    "CREATE TABLE agent_lab_schema (version integer NOT NULL)",
    """
    CREATE TABLE sessions (
        seq bigserial PRIMARY KEY,
        id text NOT NULL UNIQUE,
        title text NOT NULL,
        config text NOT NULL,
        created_at text NOT NULL,
        updated_at text NOT NULL,
        claim_epoch bigint NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE turns (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn_index integer NOT NULL,
        status text NOT NULL,
        user_message text NOT NULL,
        wall_time_ms bigint,
        round_count integer,
        failure_reason text,
        failure_message text,
        started_at text NOT NULL,
        completed_at text,
        PRIMARY KEY (session_id, turn_index)
    )
    """,
    render(MESSAGES, POSTGRES_TYPES),
    render(AUDIT_LOGS, POSTGRES_TYPES),
    AUDIT_LOGS_INDEX,
    """
    CREATE TABLE audit_blobs (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (session_id, hash)
    )
    """,
    """
    CREATE TABLE audit_lists (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash text NOT NULL,
        parent text NOT NULL,
        item text NOT NULL,
        PRIMARY KEY (session_id, hash)
    )
    """,
    render(CALL_METRICS, POSTGRES_TYPES),
    render(TOOL_BATCHES, POSTGRES_TYPES),
    TOOL_BATCHES_INDEX,
    render(TOOL_CALLS_V1, POSTGRES_TYPES),
    """
    CREATE TABLE session_claims (
        session_id text PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        token text NOT NULL,
        epoch bigint NOT NULL,
        owner text NOT NULL,
        pid integer NOT NULL,
        pid_started text,
        hostname text NOT NULL,
        claimed_at double precision NOT NULL,
        expires_at double precision NOT NULL
    )
    """,
    "INSERT INTO agent_lab_schema (version) VALUES (0)",
)

_V2: Final = (
    # SQLite's version 2 added the failure columns of turns and the audit blob tables;
    # version 1 here was written with them, so this only makes sure they are there.
    "ALTER TABLE turns ADD COLUMN IF NOT EXISTS failure_reason text",
    "ALTER TABLE turns ADD COLUMN IF NOT EXISTS failure_message text",
    """
    CREATE TABLE IF NOT EXISTS audit_blobs (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash text NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (session_id, hash)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS audit_lists (
        session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash text NOT NULL,
        parent text NOT NULL,
        item text NOT NULL,
        PRIMARY KEY (session_id, hash)
    )
    """,
)

_V3: Final = (
    # The effect ledger (DESIGN.md §9.4), as SQLite's version 3: a call is pending
    # (intent), dispatched (its handler about to run), then succeeded / failed /
    # unknown, or cancelled when it never ran.
    "ALTER TABLE tool_calls ADD COLUMN idempotency_key text",
    "ALTER TABLE tool_calls ADD COLUMN arguments text",
    "ALTER TABLE tool_calls ADD COLUMN dispatched_at text",
    "ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_state_check",
    # Before the ledger, a call without a result may or may not have run: a pending
    # batch's open calls count as dispatched (they become unknown when it is
    # abandoned), an abandoned batch's ``cancelled`` calls become unknown.
    """
    UPDATE tool_calls AS c
    SET idempotency_key = b.scope || ':' || c.event_id,
        state = CASE
            WHEN c.result IS NOT NULL THEN c.state
            WHEN b.state = 'pending' THEN 'dispatched'
            WHEN c.state = 'cancelled' THEN 'unknown'
            ELSE c.state
        END
    FROM tool_batches AS b
    WHERE b.id = c.batch_id
    """,
    """
    ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_state_check CHECK (state IN
        ('pending', 'dispatched', 'succeeded', 'failed', 'unknown', 'cancelled'))
    """,
    # The turn in which the model was told about a batch's effects (see journal).
    "ALTER TABLE tool_batches ADD COLUMN reported_turn integer",
    # Batches finished before the ledger are not reported again; a pending one (its
    # runtime died) is, once it is taken over.
    "UPDATE tool_batches SET reported_turn = turn_index WHERE state != 'pending'",
)

_V4: Final = (
    # Why the provider ended each model call's answer (``length``: cut off by
    # ``max_tokens``); calls stored before it have none.
    "ALTER TABLE call_metrics ADD COLUMN finish_reason text",
)

MIGRATIONS: Final[dict[int, tuple[str, ...]]] = {1: _V1, 2: _V2, 3: _V3, 4: _V4}
"""Statements that bring a database from version ``n - 1`` to version ``n``."""


def stored_version(conn: psycopg.Connection[TupleRow], where: str) -> int:
    """The database's schema version (0 for an empty one), checked to be ours and not newer.

    Raises:
        StoreFormatError: the schema holds another application's ``sessions`` table, or
            a newer Agent Lab schema; nothing was changed.
    """
    marker = conn.execute("SELECT to_regclass('agent_lab_schema')").fetchone()
    if marker is None or marker[0] is None:
        foreign = conn.execute("SELECT to_regclass('sessions')").fetchone()
        if foreign is not None and foreign[0] is not None:
            raise StoreFormatError(
                f"{where} already has a 'sessions' table that is not an Agent Lab session "
                "store; nothing was changed"
            )
        return 0
    row = conn.execute("SELECT max(version) FROM agent_lab_schema").fetchone()
    version = int(row[0]) if row is not None and row[0] is not None else 0
    if version > SCHEMA_VERSION:
        raise StoreFormatError(
            f"{where} has session store schema version {version}, but this Agent Lab "
            f"reads versions up to {SCHEMA_VERSION}; upgrade Agent Lab to open it"
        )
    return version


def migrate(conn: psycopg.Connection[TupleRow], where: str) -> None:
    """Bring the schema up to ``SCHEMA_VERSION`` (a no-op, without writing, when it is)."""
    with conn.transaction():
        if stored_version(conn, where) >= SCHEMA_VERSION:
            return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        version = stored_version(conn, where)
        while version < SCHEMA_VERSION:
            version += 1
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute("UPDATE agent_lab_schema SET version = %s", (version,))
