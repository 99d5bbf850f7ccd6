"""Fixtures shared by the session store tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.application.session_store import SessionStore
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.memory_store import InMemorySessionStore
from tests.store.store_support import StoreFactory


@pytest.fixture(params=["sqlite", "memory"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens handles on one store: a new connection to one SQLite file each call, or
    the same in-memory store (two runtimes of one process share it)."""
    opened: list[SessionStore] = []
    memory = InMemorySessionStore()

    def build() -> SessionStore:
        store: SessionStore
        if request.param == "sqlite":
            store = SQLiteSessionStore(tmp_path / "store.sqlite3")
        else:
            store = memory
        opened.append(store)
        return store

    yield build
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> SessionStore:
    """A fresh store: SQLite on a temporary file, or in memory."""
    return store_factory()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions" / "store.sqlite3"
