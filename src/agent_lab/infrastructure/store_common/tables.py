"""The tables both stores create the same way: one description, rendered per dialect.

The statements are written once with the column types as ``{placeholders}``;
``render`` fills them with a dialect's types. The SQLite rendering is, to the
character, the text the SQLite store's first migration has always had (SQLite keeps
that text in ``sqlite_schema``), and the PostgreSQL one the PostgreSQL store's, so
existing files and databases are unchanged. Tables whose columns differ between the
stores (``sessions``, ``turns``, ``session_claims``) stay in each store's ``schema``.
"""

from __future__ import annotations

from typing import Final, TypedDict


class ColumnTypes(TypedDict):
    """A dialect's name for each kind of column."""

    text: str
    integer: str
    """A counter or index that fits 32 bits."""
    bigint: str
    """Tokens and milliseconds."""
    serial: str
    """A generated row id (with ``PRIMARY KEY``)."""
    boolean: str


SQLITE_TYPES: Final = ColumnTypes(
    text="TEXT", integer="INTEGER", bigint="INTEGER", serial="INTEGER", boolean="INTEGER"
)
POSTGRES_TYPES: Final = ColumnTypes(
    text="text", integer="integer", bigint="bigint", serial="bigserial", boolean="boolean"
)


def render(statement: str, types: ColumnTypes) -> str:
    """``statement`` with its column types in one dialect."""
    return statement.format_map(types)


MESSAGES: Final = """
    CREATE TABLE messages (
        id {serial} PRIMARY KEY,
        session_id {text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq {integer} NOT NULL,
        turn_index {integer} NOT NULL,
        role {text} NOT NULL,
        content {text} NOT NULL,
        name {text},
        tool_call_id {text},
        tool_calls {text} NOT NULL,
        created_at {text} NOT NULL,
        UNIQUE (session_id, seq)
    )
    """

AUDIT_LOGS: Final = """
    CREATE TABLE audit_logs (
        id {serial} PRIMARY KEY,
        session_id {text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn_index {integer},
        event {text} NOT NULL,
        details {text} NOT NULL,
        created_at {text} NOT NULL
    )
    """

AUDIT_LOGS_INDEX: Final = "CREATE INDEX audit_logs_by_session ON audit_logs (session_id, id)"

CALL_METRICS: Final = """
    CREATE TABLE call_metrics (
        id {serial} PRIMARY KEY,
        session_id {text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        metric_key {text} NOT NULL,
        turn_index {integer} NOT NULL,
        round_index {integer} NOT NULL,
        call_kind {text} NOT NULL,
        agent {text} NOT NULL,
        mode {text} NOT NULL,
        model {text},
        event_id {text},
        event_name {text},
        prompt_tokens {bigint} NOT NULL,
        completion_tokens {bigint} NOT NULL,
        total_tokens {bigint} NOT NULL,
        cached_tokens {bigint} NOT NULL,
        usage_reported {boolean} NOT NULL,
        ttft_ms {bigint},
        latency_ms {bigint},
        tool_latency_ms {bigint},
        status {text},
        created_at {text} NOT NULL,
        UNIQUE (session_id, metric_key)
    )
    """

TOOL_BATCHES: Final = """
    CREATE TABLE tool_batches (
        seq {serial} PRIMARY KEY,
        id {text} NOT NULL UNIQUE,
        session_id {text} NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        turn_index {integer} NOT NULL,
        round_index {integer} NOT NULL,
        scope {text} NOT NULL,
        mode {text} NOT NULL,
        state {text} NOT NULL
            CHECK (state IN ('pending', 'committed', 'cancelled', 'failed')),
        assistant {text},
        created_at {text} NOT NULL,
        finished_at {text}
    )
    """

TOOL_BATCHES_INDEX: Final = (
    "CREATE INDEX tool_batches_by_session ON tool_batches (session_id, state)"
)

TOOL_CALLS_V1: Final = """
    CREATE TABLE tool_calls (
        batch_id {text} NOT NULL REFERENCES tool_batches(id) ON DELETE CASCADE,
        position {integer} NOT NULL,
        event {text} NOT NULL,
        event_id {text} NOT NULL,
        state {text} NOT NULL
            CHECK (state IN ('pending', 'succeeded', 'failed', 'cancelled')),
        result {text},
        landed_at {text},
        PRIMARY KEY (batch_id, position),
        UNIQUE (batch_id, event_id)
    )
    """
"""``tool_calls`` as version 1 created it (version 3 widened it to the effect ledger)."""
