"""Fixtures of the scale tests: a PostgreSQL server for the session, stopped at the end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from agent_lab.testing.postgres_server import PostgresServer, postgres_available

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if not postgres_available():
        pytest.fail("PostgreSQL is not installed: apt-get install -y postgresql")
    with PostgresServer() as server:
        yield server


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"scale_{next(_databases)}")
