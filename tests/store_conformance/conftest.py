"""The store conformance suite runs every test on SQLite and on a real PostgreSQL server.

``backend`` is parametrised: ``sqlite`` (one temporary file) and ``postgres`` (a fresh
database per test on a server this session starts with ``initdb`` / ``pg_ctl`` on a
loopback port, stopped at the end). The tests speak only through the store ports, so
what passes here holds for both adapters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.testing.postgres_server import PostgresServer
from tests.store_conformance.conformance_support import Backend, PostgresBackend, SQLiteBackend

_databases = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Opens stores on one fresh database of the parametrised kind."""
    chosen: Backend
    if request.param == "sqlite":
        chosen = SQLiteBackend(tmp_path / "store.sqlite3")
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        chosen = PostgresBackend(server, f"conformance_{next(_databases)}")
    yield chosen
    chosen.close()


@pytest.fixture
def postgres(postgres_server: PostgresServer) -> Iterator[PostgresBackend]:
    """A PostgreSQL backend only, for the failures only a server can have."""
    chosen = PostgresBackend(postgres_server, f"conformance_{next(_databases)}")
    yield chosen
    chosen.close()
