"""Backends of the conformance suite: how to open stores and make each one fail."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from agent_lab.application.session_store import CallMetric, SessionStore
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.postgres_server import PostgresServer


class Backend:
    """Opens stores on one database and closes them all at the end."""

    name = ""

    def __init__(self) -> None:
        self._opened: list[SessionStore] = []

    def _keep(self, store: SessionStore) -> SessionStore:
        self._opened.append(store)
        return store

    def open(self, *, busy_timeout_ms: int = 5000) -> SessionStore:
        raise NotImplementedError

    def open_read_only(self) -> SessionStore:
        """A store on the same data whose writes are refused by the database."""
        raise NotImplementedError

    @contextmanager
    def writer_holding_the_lock(self) -> Iterator[None]:
        """Another client holds the write lock of every session while the block runs."""
        raise NotImplementedError
        yield

    def close(self) -> None:
        for store in self._opened:
            store.close()


class SQLiteBackend(Backend):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def open(self, *, busy_timeout_ms: int = 5000) -> SessionStore:
        return self._keep(SQLiteSessionStore(self.path, busy_timeout_ms=busy_timeout_ms))

    def open_read_only(self) -> SessionStore:
        return self._keep(SQLiteSessionStore(self.path, read_only=True))

    @contextmanager
    def writer_holding_the_lock(self) -> Iterator[None]:
        other = sqlite3.connect(self.path, isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, server: PostgresServer, database: str) -> None:
        super().__init__()
        self.server = server
        self.database = database
        self.url = server.create_database(database)

    def open(self, *, busy_timeout_ms: int = 5000) -> SessionStore:
        return self._keep(PostgresSessionStore(self.url, busy_timeout_ms=busy_timeout_ms))

    def open_read_only(self) -> SessionStore:
        url = f"{self.url}?options=-c%20default_transaction_read_only%3Don"
        return self._keep(PostgresSessionStore(url))

    @contextmanager
    def writer_holding_the_lock(self) -> Iterator[None]:
        with psycopg.connect(self.url) as other:
            other.execute("SELECT id FROM sessions FOR UPDATE")
            yield
            other.rollback()

    def terminate_store_connections(self) -> int:
        """End every server process serving a store on this database (as a restart,
        a failover or a network cut would); return how many were ended."""
        with psycopg.connect(self.server.url(), autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND application_name = 'agent-lab'",
                (self.database,),
            ).fetchall()
        return len(rows)


# ------------------------------------------------------------------- builders


LEASE = 0.3
"""A claim lease short enough for a test to outlive it."""


def expire() -> None:
    """Wait until a claim taken with ``LEASE`` has expired."""
    time.sleep(LEASE + 0.2)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str, *calls: ToolCallEvent) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, tool_calls=list(calls))


def call(call_id: str, name: str = "safe_tool", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments, raw_arguments="{}")


def tool_reply(event: ToolCallEvent, content: str = '{"ok": true}') -> ChatMessage:
    return ChatMessage(role="tool", content=content, name=event.name, tool_call_id=event.id)


def chat_metric(turn: int, round_index: int, **fields: Any) -> CallMetric:
    return CallMetric(
        metric_key=f"chat:{turn}:{round_index}",
        turn_index=turn,
        round_index=round_index,
        call_kind="chat",
        agent="chat_agent",
        mode="chat_agent_tools",
        **fields,
    )


def tool_metric(turn: int, round_index: int, event_id: str, **fields: Any) -> CallMetric:
    return CallMetric(
        metric_key=f"tool:{turn}:{round_index}:{event_id}",
        turn_index=turn,
        round_index=round_index,
        call_kind="tool_execution",
        agent="tool",
        mode="chat_agent_tools",
        event_id=event_id,
        **fields,
    )


def without_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without their timestamps, to compare what two stores hold."""
    stamps = {"created_at", "updated_at", "started_at", "completed_at", "landed_at"}
    return [{k: v for k, v in row.items() if k not in stamps | {"finished_at"}} for row in rows]
