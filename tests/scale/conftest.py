"""Fixtures of the scale tests: a PostgreSQL server for the session, stopped at the end."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from agent_lab.testing.postgres_server import PostgresServer, postgres_available

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if not postgres_available():
        hint = "PostgreSQL is not installed: sudo apt-get install postgresql"
        if os.environ.get("AGENT_LAB_REQUIRE_POSTGRES") == "1":
            pytest.fail(hint)
        pytest.skip(hint)
    with PostgresServer() as server:
        yield server


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"scale_{next(_databases)}")
