"""SQLSTATE classification of the PostgreSQL store, on the server's own error classes."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg

from agent_lab.infrastructure.postgres.errors import classify_pg_error, map_pg_errors


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pg.LockNotAvailable, "locked"),
        (pg.DeadlockDetected, "locked"),
        (pg.SerializationFailure, "locked"),
        (pg.QueryCanceled, "locked"),
        (pg.DiskFull, "disk_full"),
        (pg.OutOfMemory, "disk_full"),
        (pg.ReadOnlySqlTransaction, "read_only"),
        (pg.InsufficientPrivilege, "read_only"),
        (pg.DataCorrupted, "corrupt"),
        (pg.IndexCorrupted, "corrupt"),
        (pg.AdminShutdown, "connection_lost"),
        (pg.CannotConnectNow, "connection_lost"),
        (pg.ConnectionFailure, "connection_lost"),
        (pg.UniqueViolation, "unknown"),
    ],
)
def test_each_sqlstate_class_maps_to_its_reason(error: type[psycopg.Error], reason: str) -> None:
    assert classify_pg_error(error("boom")) == reason


def test_a_client_side_operational_error_is_a_lost_connection() -> None:
    assert classify_pg_error(psycopg.OperationalError("server closed the connection")) == (
        "connection_lost"
    )
    assert classify_pg_error(psycopg.ProgrammingError("bad")) == "unknown"


def test_map_pg_errors_chains_the_cause() -> None:
    with pytest.raises(Exception) as raised, map_pg_errors():
        raise pg.DiskFull("could not extend file")
    assert type(raised.value).__name__ == "PersistenceFailed"
    assert isinstance(raised.value.__cause__, pg.DiskFull)
