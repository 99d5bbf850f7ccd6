"""Real storage faults, classified: a held lock, a full disk, read-only storage, corruption.

Every fault here is produced by SQLite or the operating system, never by a mock:

* ``locked`` — a second ``sqlite3`` connection holds ``BEGIN EXCLUSIVE``.
* ``disk_full`` — SQLite's page cap (the store's ``max_size_bytes`` option, i.e.
  ``PRAGMA max_page_count``) and, where the tests may mount file systems (root on
  Linux), a real ``ENOSPC`` on a tiny tmpfs in a private mount namespace.
* ``read_only`` — the store opened with ``read_only=True`` (SQLite ``mode=ro``); the file
  made unwritable (``chmod 0444`` for ordinary users; ``chattr +i`` for root, whom
  permission bits do not stop); and a read-only mount in a private mount namespace.
* ``corrupt`` — pages in the middle of a real store overwritten with garbage.

For each, the test checks the classified reason and that the failed write left no row.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.domain.errors import PersistenceFailed
from agent_lab.infrastructure.sqlite.errors import (
    classify_sqlite_error,
    map_sqlite_errors,
    persistence_failed,
)
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import (
    PRIVATE_MOUNTS,
    assistant,
    call,
    run_in_private_mount,
    unwritable,
    user,
)

needs_private_mounts = pytest.mark.skipif(
    not PRIVATE_MOUNTS, reason="needs root and unshare to mount a private file system"
)


def _assert_reason(error: PersistenceFailed, reason: str) -> None:
    assert error.reason == reason
    assert error.failure_reason == f"session_persistence_failed:{reason}"
    assert isinstance(error.__cause__, sqlite3.Error)


def _batch(store: SQLiteSessionStore, session_id: str) -> str:
    return store.begin_batch(
        session_id,
        1,
        1,
        scope="s:round-1",
        mode="chat_agent_tools",
        events=[call("c1"), call("c2")],
        assistant=assistant("", call("c1"), call("c2")),
        visible=[assistant("working on it")],
    )


# --------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("database disk image is malformed", "corrupt"),
        ("file is not a database", "corrupt"),
        ("database is locked", "locked"),
        ("database table is locked", "locked"),
        ("database or disk is full", "disk_full"),
        ("attempt to write a readonly database", "read_only"),
        ("read-only file system", "read_only"),
        ("disk I/O error", "unknown"),
        ("no such table: nowhere", "unknown"),
    ],
)
def test_classification_by_message_when_sqlite_gives_no_code(message: str, reason: str) -> None:
    assert classify_sqlite_error(sqlite3.OperationalError(message)) == reason


def test_the_code_wins_over_the_wording_and_locks_never_speak_of_disks() -> None:
    error = sqlite3.OperationalError("disk is busy")
    error.sqlite_errorcode = 5  # SQLITE_BUSY
    assert classify_sqlite_error(error) == "locked"
    failure = persistence_failed(error)
    assert failure.reason == "locked"
    assert "busy" in str(failure) and "disk" not in str(failure)


def test_map_sqlite_errors_chains_and_passes_other_errors_through() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(PersistenceFailed) as raised, map_sqlite_errors():
        conn.execute("SELECT * FROM nowhere")
    _assert_reason(raised.value, "unknown")
    with pytest.raises(KeyError), map_sqlite_errors():
        raise KeyError("not ours")
    conn.close()


# ---------------------------------------------------------------------- locked


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[tuple[SQLiteSessionStore, sqlite3.Connection]]:
    path = tmp_path / "locked.sqlite3"
    store = SQLiteSessionStore(path, busy_timeout_ms=100)
    store.create_session("t", {}, session_id="s")
    store.start_turn("s", 1, "hi")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    yield store, holder
    if holder.in_transaction:
        holder.execute("ROLLBACK")
    holder.close()
    store.close()


def test_a_held_write_lock_fails_writes_as_locked_after_the_busy_timeout(
    locked_store: tuple[SQLiteSessionStore, sqlite3.Connection],
) -> None:
    store, holder = locked_store
    started = time.monotonic()
    with pytest.raises(PersistenceFailed) as raised:
        store.append_messages("s", 1, [user("a"), user("b")])
    waited = time.monotonic() - started
    _assert_reason(raised.value, "locked")
    assert waited >= 0.09  # it waited for the busy timeout before giving up
    text = str(raised.value).lower()
    assert "busy" in text and "disk" not in text and "full" not in text
    for write in (
        lambda: _batch(store, "s"),
        lambda: store.append_audit("s", 1, "e", {}),
        lambda: store.create_session("t", {}),
        lambda: store.claim_session("s", "r"),
    ):
        with pytest.raises(PersistenceFailed) as again:
            write()
        _assert_reason(again.value, "locked")
    # Reads still work in WAL mode while another connection writes.
    assert store.list_messages("s") == []
    holder.execute("ROLLBACK")
    assert store.list_messages("s") == []
    assert store.list_batches("s") == []
    assert store.list_audit_logs("s") == []
    assert len(store.list_sessions()) == 1
    store.append_message("s", 1, user("after the lock"))


def test_a_lock_released_within_the_budget_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "wait.sqlite3"
    with SQLiteSessionStore(path, busy_timeout_ms=3000) as store:
        store.create_session("t", {}, session_id="s")
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.2, holder.execute, ("ROLLBACK",))
        release.start()
        store.append_message("s", 1, user("waited"))
        release.join()
        holder.close()
        assert [m["content"] for m in store.list_messages("s")] == ["waited"]


# ------------------------------------------------------------------- disk full


def test_a_full_store_fails_as_disk_full_and_rolls_back_the_whole_write(tmp_path: Path) -> None:
    with SQLiteSessionStore(tmp_path / "full.sqlite3", max_size_bytes=256 * 1024) as store:
        store.create_session("t", {}, session_id="s")
        store.append_message("s", 1, user("kept"))
        big = [user(f"{i}" + "x" * 20_000) for i in range(30)]  # ~600 KB in one write
        with pytest.raises(PersistenceFailed) as raised:
            store.append_messages("s", 1, big)
        _assert_reason(raised.value, "disk_full")
        assert "disk" in str(raised.value).lower()
        assert [m["content"] for m in store.list_messages("s")] == ["kept"]
        # Fill the rest in small steps until even a batch journal entry cannot be written.
        with pytest.raises(PersistenceFailed) as filled:
            for i in range(1000):
                store.append_message("s", 1, user(f"{i}" + "y" * 4000))
        _assert_reason(filled.value, "disk_full")
        messages = len(store.list_messages("s"))
        with pytest.raises(PersistenceFailed) as journal:
            for _ in range(1000):
                _batch(store, "s")
        _assert_reason(journal.value, "disk_full")
        batches = store.list_batches("s")
        assert all(len(batch["calls"]) == 2 for batch in batches)
        assert len(store.list_messages("s")) == messages + len(batches)  # one visible each


_FILL_TMPFS = """
import json, sys
from agent_lab.domain.errors import PersistenceFailed
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

path = sys.argv[1] + "/store.sqlite3"
store = SQLiteSessionStore(path)
store.create_session("t", {}, session_id="s")
batch = [ChatMessage(role="user", content=f"{i}" + "z" * 16000) for i in range(4)]
writes, error = 0, None
try:
    while True:
        store.append_messages("s", 1, batch)
        writes += 1
except PersistenceFailed as exc:
    error = exc
count = len(store.list_messages("s"))
store.close()
reopened = len(SQLiteSessionStore(path, read_only=True).list_messages("s"))
print(json.dumps({"reason": error.reason, "message": str(error), "writes": writes,
                  "count": count, "reopened": reopened}))
"""


@needs_private_mounts
def test_a_real_full_file_system_fails_as_disk_full(tmp_path: Path) -> None:
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    done = run_in_private_mount(
        f"mount -t tmpfs -o size=600k tmpfs {mount_point}", _FILL_TMPFS, str(mount_point)
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["reason"] == "disk_full", result
    assert result["writes"] > 0
    assert result["count"] == 4 * result["writes"]  # no half-written batch of four
    assert result["reopened"] == result["count"]  # nothing committed was lost


# ------------------------------------------------------------------- read-only


def _made_store(path: Path) -> bytes:
    with SQLiteSessionStore(path) as store:
        store.create_session("t", {}, session_id="s")
        store.append_message("s", 1, user("before"))
    return path.read_bytes()


def _assert_writes_fail_read_only(store: SQLiteSessionStore) -> None:
    assert [m["content"] for m in store.list_messages("s")] == ["before"]
    writes = (
        lambda: store.append_messages("s", 1, [user("a"), user("b")]),
        lambda: _batch(store, "s"),
        lambda: store.create_session("u", {}),
        lambda: store.start_turn("s", 1, "x"),
    )
    for write in writes:
        with pytest.raises(PersistenceFailed) as raised:
            write()
        _assert_reason(raised.value, "read_only")
        assert "read-only" in str(raised.value)
    assert [m["content"] for m in store.list_messages("s")] == ["before"]
    assert store.list_batches("s") == []


def test_a_store_opened_read_only_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite3"
    content = _made_store(path)
    with SQLiteSessionStore(path, read_only=True) as store:
        _assert_writes_fail_read_only(store)
    assert path.read_bytes() == content


def test_an_unwritable_store_file_is_refused_for_writing_naming_the_cause(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked-down.sqlite3"
    content = _made_store(path)
    with unwritable(path):
        with pytest.raises(PersistenceFailed) as refused:
            SQLiteSessionStore(path)  # not opened read-only without a word
        assert path.read_bytes() == content
        assert sorted(entry.name for entry in tmp_path.iterdir()) == [path.name]
    assert refused.value.reason == "read_only"
    cause = "immutable (chattr +i)" if os.geteuid() == 0 else "may not write it"
    assert f"cannot open {path}: " in str(refused.value) and cause in str(refused.value)


_OPEN_READ_ONLY_MOUNT = """
import json, sys
from agent_lab.domain.errors import PersistenceFailed
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

path = sys.argv[1] + "/store.sqlite3"
try:
    SQLiteSessionStore(path)
    writable = {"reason": None}
except PersistenceFailed as exc:
    writable = {"reason": exc.reason, "message": str(exc)}
with SQLiteSessionStore(path, read_only=True) as reader:
    contents = [m["content"] for m in reader.list_messages("s")]
print(json.dumps({"writable": writable, "contents": contents}))
"""


@needs_private_mounts
def test_a_store_on_a_read_only_mount(tmp_path: Path) -> None:
    source, mount_point = tmp_path / "source", tmp_path / "ro"
    source.mkdir()
    mount_point.mkdir()
    content = _made_store(source / "store.sqlite3")
    done = run_in_private_mount(
        f"mount --bind {source} {mount_point} && mount -o remount,ro,bind {mount_point}",
        _OPEN_READ_ONLY_MOUNT,
        str(mount_point),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["writable"]["reason"] == "read_only", result
    assert "read-only file system" in result["writable"]["message"]
    assert result["contents"] == ["before"]  # read_only=True still reads it
    assert (source / "store.sqlite3").read_bytes() == content


# --------------------------------------------------------------------- corrupt


def _corrupt_messages(path: Path) -> None:
    """Overwrite the transcript's b-tree pages, in the middle of the file, with garbage."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    roots = [
        row[0]
        for row in conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE tbl_name = 'messages' AND rootpage > 0"
        )
    ]
    conn.close()
    middle = range(page_count // 3, 2 * page_count // 3)
    garbage = b"\xde\xad\xbe\xef" * (page_size // 4)
    with path.open("r+b") as handle:
        for page in {*roots, *middle}:
            handle.seek((page - 1) * page_size)
            handle.write(garbage)


def _store_with_a_transcript(path: Path) -> None:
    with SQLiteSessionStore(path) as store:
        store.create_session("t", {}, session_id="s")
        store.append_messages("s", 1, [user(f"{i}" + "m" * 3000) for i in range(200)])
        store.append_audit("s", None, "before", {})


def test_a_corrupted_store_is_refused_for_writing_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite3"
    _store_with_a_transcript(path)
    size = path.stat().st_size
    _corrupt_messages(path)
    assert path.stat().st_size == size
    damaged = hashlib.md5(path.read_bytes()).hexdigest()
    with pytest.raises(PersistenceFailed) as opened:
        SQLiteSessionStore(path)
    assert opened.value.reason == "corrupt"
    assert str(path) in str(opened.value) and "quick_check" in str(opened.value)
    assert "left unchanged" in str(opened.value)
    assert hashlib.md5(path.read_bytes()).hexdigest() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.sqlite3"]
    # Read-only, what is on intact pages can still be read.
    with SQLiteSessionStore(path, read_only=True) as reader:
        assert [a["event"] for a in reader.list_audit_logs("s")] == ["before"]
        with pytest.raises(PersistenceFailed) as read:
            reader.list_messages("s")
        _assert_reason(read.value, "corrupt")
    assert hashlib.md5(path.read_bytes()).hexdigest() == damaged


def test_pages_damaged_while_open_fail_as_corrupt_and_leave_no_partial_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "corrupt.sqlite3"
    _store_with_a_transcript(path)
    with SQLiteSessionStore(path) as store:
        _corrupt_messages(path)
        with pytest.raises(PersistenceFailed) as read:
            store.list_messages("s")
        _assert_reason(read.value, "corrupt")
        assert "malformed" in str(read.value)
        # The batch rows land in intact tables before the transcript write fails.
        with pytest.raises(PersistenceFailed) as write:
            _batch(store, "s")
        _assert_reason(write.value, "corrupt")
        assert store.list_batches("s") == []
        # Tables on intact pages keep working.
        store.append_audit("s", None, "still_usable", {})
        assert [a["event"] for a in store.list_audit_logs("s")] == ["before", "still_usable"]


def test_a_store_with_a_damaged_schema_page_is_corrupt_at_open(tmp_path: Path) -> None:
    path = tmp_path / "header.sqlite3"
    _made_store(path)
    with path.open("r+b") as handle:
        handle.seek(100)  # keep the file header, wreck the schema b-tree page
        handle.write(b"\x00\xff" * 1000)
    content = path.read_bytes()
    with pytest.raises(PersistenceFailed) as raised:
        SQLiteSessionStore(path)
    _assert_reason(raised.value, "corrupt")
    assert str(path) in str(raised.value) and "malformed" in str(raised.value)
    assert path.read_bytes() == content
