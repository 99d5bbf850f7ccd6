"""The SQLite store's schema, its version checks and its forward migrations.

The schema version lives in ``PRAGMA user_version`` and the file is marked as an Agent
Lab store with ``PRAGMA application_id``. ``MIGRATIONS[n]`` turns a version ``n - 1``
file into a version ``n`` file; each runs in its own ``BEGIN IMMEDIATE`` transaction,
so a failed migration leaves the previous version intact. Never edit a released
migration: append a new one and raise ``SCHEMA_VERSION``.

Every check here runs before the store writes anything, so a file that is not a store,
belongs to another application, or was written by a newer Agent Lab is left
byte-for-byte unchanged.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from agent_lab.domain.errors import PersistenceFailed, StoreFormatError
from agent_lab.infrastructure.sqlite.errors import classify_os_error
from agent_lab.infrastructure.store_common.tables import (
    AUDIT_LOGS,
    AUDIT_LOGS_INDEX,
    CALL_METRICS,
    MESSAGES,
    SQLITE_TYPES,
    TOOL_BATCHES,
    TOOL_BATCHES_INDEX,
    TOOL_CALLS_V1,
    render,
)

SCHEMA_VERSION = 4
"""The newest schema this code reads and writes."""

APPLICATION_ID = 0x41474C42
"""``PRAGMA application_id`` of an Agent Lab store (ASCII ``AGLB``)."""

SQLITE_HEADER = b"SQLite format 3\x00"

_V1 = (
    """
    CREATE TABLE sessions (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        config TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE turns (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn_index INTEGER NOT NULL,
        status TEXT NOT NULL,
        user_message TEXT NOT NULL,
        wall_time_ms INTEGER,
        round_count INTEGER,
        started_at TEXT NOT NULL,
        completed_at TEXT,
        PRIMARY KEY (session_id, turn_index)
    )
    """,
    render(MESSAGES, SQLITE_TYPES),
    render(AUDIT_LOGS, SQLITE_TYPES),
    AUDIT_LOGS_INDEX,
    render(CALL_METRICS, SQLITE_TYPES),
    render(TOOL_BATCHES, SQLITE_TYPES),
    TOOL_BATCHES_INDEX,
    render(TOOL_CALLS_V1, SQLITE_TYPES),
    """
    CREATE TABLE session_claims (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        token TEXT NOT NULL,
        owner TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_started TEXT,
        hostname TEXT NOT NULL,
        claimed_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )
    """,
    f"PRAGMA application_id = {APPLICATION_ID}",
)

_V2 = (
    # Why a turn failed (issue: failure reasons are part of the record).
    "ALTER TABLE turns ADD COLUMN failure_reason TEXT",
    "ALTER TABLE turns ADD COLUMN failure_message TEXT",
    # Large audit values stored once per session and referenced by hash.
    """
    CREATE TABLE audit_blobs (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, hash)
    ) WITHOUT ROWID
    """,
    # Message lists of request audits as chains of nodes (see ``blobs``).
    """
    CREATE TABLE audit_lists (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        parent TEXT NOT NULL,
        item TEXT NOT NULL,
        PRIMARY KEY (session_id, hash)
    ) WITHOUT ROWID
    """,
)

_V3 = (
    # The effect ledger (DESIGN.md §9.4): a call is pending (intent), dispatched (its
    # handler about to run), then succeeded / failed / unknown, or cancelled when it
    # never ran. SQLite cannot widen a CHECK constraint, so the table is rebuilt.
    """
    CREATE TABLE tool_calls_v3 (
        batch_id TEXT NOT NULL REFERENCES tool_batches(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        event TEXT NOT NULL,
        event_id TEXT NOT NULL,
        idempotency_key TEXT,
        state TEXT NOT NULL CHECK (state IN
            ('pending', 'dispatched', 'succeeded', 'failed', 'unknown', 'cancelled')),
        arguments TEXT,
        dispatched_at TEXT,
        result TEXT,
        landed_at TEXT,
        PRIMARY KEY (batch_id, position),
        UNIQUE (batch_id, event_id)
    )
    """,
    # Before the ledger, a call without a result may or may not have run: a pending
    # batch's open calls count as dispatched (they become unknown when it is
    # abandoned), an abandoned batch's ``cancelled`` calls become unknown.
    """
    INSERT INTO tool_calls_v3 (batch_id, position, event, event_id, idempotency_key,
                               state, result, landed_at)
    SELECT c.batch_id, c.position, c.event, c.event_id, b.scope || ':' || c.event_id,
           CASE
               WHEN c.result IS NOT NULL THEN c.state
               WHEN b.state = 'pending' THEN 'dispatched'
               WHEN c.state = 'cancelled' THEN 'unknown'
               ELSE c.state
           END,
           c.result, c.landed_at
    FROM tool_calls AS c JOIN tool_batches AS b ON b.id = c.batch_id
    """,
    "DROP TABLE tool_calls",
    "ALTER TABLE tool_calls_v3 RENAME TO tool_calls",
    # The turn in which the model was told about a batch's effects (see journal).
    "ALTER TABLE tool_batches ADD COLUMN reported_turn INTEGER",
    # Batches finished before the ledger are not reported again; a pending one (its
    # runtime died) is, once it is taken over.
    "UPDATE tool_batches SET reported_turn = turn_index WHERE state != 'pending'",
)

_V4 = (
    # Why the provider ended each model call's answer (``length``: cut off by
    # ``max_tokens``); calls stored before it have none.
    "ALTER TABLE call_metrics ADD COLUMN finish_reason TEXT",
)

MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1, 2: _V2, 3: _V3, 4: _V4}
"""Statements that bring a file from version ``n - 1`` to version ``n``."""


def check_file_header(path: Path) -> None:
    """Refuse a non-empty file that does not start with the SQLite header.

    Raises:
        StoreFormatError: naming the file; the file is not touched.
        PersistenceFailed: the file cannot be read.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PersistenceFailed(classify_os_error(exc), f"cannot read {path}: {exc}") from exc
    if head and head != SQLITE_HEADER:
        raise StoreFormatError(
            f"{path} is not an SQLite database, so it cannot be an Agent Lab session "
            "store; the file was left unchanged"
        )


def stored_version(conn: sqlite3.Connection, path: Path) -> int:
    """Return the file's schema version after checking the file is ours and not newer.

    Raises:
        StoreFormatError: the file belongs to another application, or its schema is
            newer than ``SCHEMA_VERSION``; nothing was changed.
    """
    application_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if application_id == 0 and version == 0:
        tables = int(conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0])
        if tables:
            raise _foreign(path)
        return 0
    if application_id != APPLICATION_ID:
        raise _foreign(path)
    if version > SCHEMA_VERSION:
        raise StoreFormatError(
            f"{path} has session store schema version {version}, but this Agent Lab "
            f"reads versions up to {SCHEMA_VERSION}; upgrade Agent Lab to open it "
            "(the file was left unchanged)"
        )
    return version


def read_version(conn: sqlite3.Connection, path: Path) -> int:
    """``stored_version`` read in one snapshot, so a concurrent migration is seen whole."""
    conn.execute("BEGIN")
    try:
        return stored_version(conn, path)
    finally:
        rollback_quietly(conn)


def _foreign(path: Path) -> StoreFormatError:
    return StoreFormatError(
        f"{path} is an SQLite database of another application, not an Agent Lab "
        "session store; the file was left unchanged"
    )


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Apply every missing migration, one transaction each; return the final version.

    The version is re-read inside each transaction, so two processes opening the same
    new file at once migrate it once.

    Raises:
        StoreFormatError: as ``stored_version``.
        sqlite3.Error: a migration failed; it was rolled back.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = stored_version(conn, path)
            if version >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return version
            for statement in MIGRATIONS[version + 1]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            rollback_quietly(conn)
            raise


def rollback_quietly(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any, without masking the error in flight."""
    # After some failures (e.g. SQLITE_FULL) SQLite has already rolled back itself.
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
