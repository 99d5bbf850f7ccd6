"""A store file deleted or replaced underneath, a held lock, a transient corrupt error."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_support import user

from agent_lab.domain.errors import PersistenceFailed
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


def _turns_on_disk(path: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT turn_index, status FROM turns ORDER BY turn_index").fetchall()
    finally:
        conn.close()


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "store.sqlite3") as store:
        store.create_session("files", {}, session_id="s")
        store.start_turn("s", 1, "first", messages=[user("first")])
        yield store


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_writes_to_a_deleted_store_file_fail_and_report_nothing_completed(
    opened: SQLiteSessionStore,
) -> None:
    _delete(opened.path)
    with pytest.raises(PersistenceFailed) as caught:
        opened.complete_turn("s", 1, status="completed")
    assert caught.value.reason == "file_replaced"
    assert caught.value.failure_reason == "session_persistence_failed:file_replaced"
    assert "was deleted" in str(caught.value) and str(opened.path) in str(caught.value)
    with pytest.raises(PersistenceFailed, match="deleted or replaced"):
        opened.append_messages("s", 1, [user("lost")])
    assert not opened.path.exists()


def test_writes_to_a_replaced_store_file_fail_and_leave_the_new_file_alone(
    opened: SQLiteSessionStore, tmp_path: Path
) -> None:
    other_path = tmp_path / "other.sqlite3"
    with SQLiteSessionStore(other_path) as other:
        other.create_session("other", {}, session_id="s")
        other.start_turn("s", 1, "other first")
    shutil.move(other_path, opened.path)  # a new inode at the store's path
    with pytest.raises(PersistenceFailed) as caught:
        opened.complete_turn("s", 1, status="completed")
    assert caught.value.reason == "file_replaced"
    assert "replaced by another file" in str(caught.value)
    assert _turns_on_disk(opened.path) == [(1, "running")]


def test_a_store_reopened_at_the_path_writes_to_the_new_file(
    opened: SQLiteSessionStore, tmp_path: Path
) -> None:
    _delete(opened.path)
    with SQLiteSessionStore(opened.path) as fresh:
        fresh.create_session("again", {}, session_id="s2")
    assert opened.path.exists()
    with pytest.raises(PersistenceFailed, match="replaced"):
        opened.create_session("stale", {}, session_id="s3")


@contextmanager
def _held_lock(path: Path) -> Iterator[sqlite3.Connection]:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield holder
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_held_lock_is_waited_for_once_then_the_next_write_fails_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.sqlite3"
    with SQLiteSessionStore(path, busy_timeout_ms=60_000) as warm:
        warm.create_session("locked", {}, session_id="s")
        warm.start_turn("s", 1, "first")
    with SQLiteSessionStore(path, busy_timeout_ms=300) as store, _held_lock(path):
        with pytest.raises(PersistenceFailed) as first:
            store.append_messages("s", 1, [user("blocked")])
        with pytest.raises(PersistenceFailed) as second:  # the turn's closing write
            store.complete_turn("s", 1, status="failed")
        assert first.value.reason == second.value.reason == "locked"
        assert "does not wait again" not in str(first.value)
        assert "waited 300 ms for it a moment ago and does not wait again" in str(second.value)


def test_after_a_lock_wait_a_free_store_writes_again_at_once(tmp_path: Path) -> None:
    path = tmp_path / "freed.sqlite3"
    with SQLiteSessionStore(path, busy_timeout_ms=300) as store:
        store.create_session("freed", {}, session_id="s")
        store.start_turn("s", 1, "first")
        with _held_lock(path), pytest.raises(PersistenceFailed, match="busy"):
            store.append_messages("s", 1, [user("blocked")])
        store.complete_turn("s", 1, status="completed")
        assert _turns_on_disk(path) == [(1, "completed")]


def test_a_corrupt_error_on_a_sound_file_is_not_reported_as_corrupt(
    opened: SQLiteSessionStore,
) -> None:
    # What a transient disk I/O error can leave behind: the connection reports the
    # database as malformed although the file is intact.
    with pytest.raises(PersistenceFailed) as caught, opened._write():
        raise sqlite3.DatabaseError("database disk image is malformed")
    assert caught.value.reason == "unknown"
    assert "passes an integrity check" in str(caught.value)
    opened.complete_turn("s", 1, status="completed")  # the reset connection works
    assert _turns_on_disk(opened.path) == [(1, "completed")]


def test_a_really_corrupt_file_is_still_reported_as_corrupt(opened: SQLiteSessionStore) -> None:
    opened.close()
    original = opened.path.read_bytes()
    page_size = int.from_bytes(original[16:18], "big")
    garbage = bytes((i * 37 + 11) % 256 for i in range(len(original) - page_size))
    opened.path.write_bytes(original[:page_size] + garbage)
    with pytest.raises(PersistenceFailed) as caught, SQLiteSessionStore(opened.path) as broken:
        broken.append_messages("s", 1, [user("x")])
    assert caught.value.reason == "corrupt"
