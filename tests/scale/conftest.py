"""Fixtures of the scale tests: a PostgreSQL server for the session, stopped at the end."""

from __future__ import annotations

import itertools

import pytest

from agent_lab.testing.postgres_server import PostgresServer

_databases = itertools.count(1)


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"scale_{next(_databases)}")
