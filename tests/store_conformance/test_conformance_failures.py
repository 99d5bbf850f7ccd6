"""Classified failures on every store, and the ones only a database server can have."""

from __future__ import annotations

import pytest

from agent_lab.domain.errors import PersistenceFailed, SessionBusy
from tests.store_conformance.conformance_support import Backend, PostgresBackend, assistant, user


def test_a_held_write_lock_fails_a_write_as_locked_and_the_next_one_at_once(
    backend: Backend,
) -> None:
    store = backend.open(busy_timeout_ms=300)
    session = store.create_session("t", {})
    store.start_turn(session, 1, "hi", messages=[user("hi")])
    with backend.writer_holding_the_lock():
        for _ in range(2):
            with pytest.raises(PersistenceFailed) as failed:
                store.append_message(session, 1, assistant("blocked"))
            assert failed.value.reason == "locked"
            assert failed.value.failure_reason == "session_persistence_failed:locked"
    store.append_message(session, 1, assistant("after"))
    assert [m["content"] for m in store.list_messages(session)] == ["hi", "after"]


def test_a_read_only_database_fails_writes_as_read_only_and_still_reads(
    backend: Backend,
) -> None:
    writer = backend.open()
    session = writer.create_session("t", {})
    writer.start_turn(session, 1, "hi", messages=[user("hi")])
    reader = backend.open_read_only()
    assert [m["content"] for m in reader.list_messages(session)] == ["hi"]
    for write in (
        lambda: reader.append_message(session, 1, assistant("no")),
        lambda: reader.create_session("t", {}),
        lambda: reader.claim_session(session, "reader"),
    ):
        with pytest.raises(PersistenceFailed) as failed:
            write()
        assert failed.value.reason == "read_only"
    assert len(writer.list_messages(session)) == 1


def test_a_lost_connection_fails_as_connection_lost_and_the_next_write_reconnects(
    postgres: PostgresBackend,
) -> None:
    store = postgres.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "hi", messages=[user("hi")])
    assert postgres.terminate_store_connections() == 1

    with pytest.raises(PersistenceFailed) as failed:
        store.append_message(session, 1, assistant("lost"))
    assert failed.value.reason == "connection_lost"
    assert failed.value.failure_reason == "session_persistence_failed:connection_lost"
    store.append_message(session, 1, assistant("reconnected"))
    assert [m["content"] for m in store.list_messages(session)] == ["hi", "reconnected"]


def test_a_fenced_session_survives_a_reconnect(postgres: PostgresBackend) -> None:
    store = postgres.open()
    session = store.create_session("t", {})
    token = store.claim_session(session, "owner")
    postgres.terminate_store_connections()
    with pytest.raises(PersistenceFailed):
        store.renew_claim(session, token)
    store.renew_claim(session, token)  # the claim outlived the connection
    store.append_message(session, 1, assistant("still the owner"))
    with pytest.raises(SessionBusy, match="owner"):
        postgres.open().claim_session(session, "intruder")
