"""``write_now``: a short write on the calling thread when nothing can make it wait.

Real SQLite files and real faults: a second connection holding ``BEGIN EXCLUSIVE``,
a thread inside an ``atomic_writes()`` block, a file-size cap that fills up, a
read-only store, damaged pages. Each time ``write_now`` declines (``NotNow``) without
writing anything, and the same write made the usual way then waits or fails exactly
as it always does.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_lab.application.session_store import NotNow
from agent_lab.domain.errors import PersistenceFailed, SessionBusy
from agent_lab.infrastructure.sqlite.connection import CHECKPOINT_COMMITS
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import user
from tests.store.test_atomic_writes import commit_frames


def _open(path: Path, **options: object) -> SQLiteSessionStore:
    store = SQLiteSessionStore(path, **options)  # type: ignore[arg-type]
    store.ensure_session("s", "now", {})
    return store


@contextlib.contextmanager
def _held_lock(path: Path) -> Iterator[sqlite3.Connection]:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield holder
    finally:
        with contextlib.suppress(sqlite3.Error):
            holder.execute("ROLLBACK")
        holder.close()


def _turn(store: SQLiteSessionStore, index: int, text: str = "hi") -> Callable[[], None]:
    def work() -> None:
        store.append_audits("s", [(index, "turn_started", {"turn_index": index})])
        store.start_turn("s", index, text, messages=[user(text)])

    return work


def _turns(path: Path) -> int:
    probe = sqlite3.connect(path)
    try:
        return int(probe.execute("SELECT count(*) FROM turns").fetchone()[0])
    finally:
        probe.close()


def test_write_now_commits_its_writes_as_one_transaction(tmp_path: Path) -> None:
    store = _open(tmp_path / "now.sqlite3")
    before = commit_frames(store.path)
    store.write_now(_turn(store, 1))
    assert commit_frames(store.path) == before + 1
    assert [m["content"] for m in store.list_messages("s")] == ["hi"]
    assert [a["event"] for a in store.list_audit_logs("s")] == ["turn_started"]
    token = store.write_now(lambda: store.claim_session("s", "me"))
    other = SQLiteSessionStore(store.path)
    with pytest.raises(SessionBusy):
        other.claim_session("s", "them")
    store.release_claim("s", token)  # the claim write_now made is this store's own
    other.claim_session("s", "them")
    other.close()
    store.close()


def test_a_lock_held_elsewhere_declines_at_once_and_the_usual_write_still_waits(
    tmp_path: Path,
) -> None:
    store = _open(tmp_path / "now.sqlite3", busy_timeout_ms=10_000)
    with _held_lock(store.path) as holder:
        with pytest.raises(NotNow) as declined:
            store.write_now(_turn(store, 1))
        assert isinstance(declined.value.__cause__, sqlite3.OperationalError)
        assert _turns(store.path) == 0
        release = threading.Timer(0.2, holder.execute, ("ROLLBACK",))
        release.start()
        # Had write_now counted as a wait given up on, this would fail at once.
        _turn(store, 1)()
        release.join()
    assert _turns(store.path) == 1
    store.close()


def test_a_lock_held_past_the_timeout_fails_the_usual_write_as_locked(tmp_path: Path) -> None:
    store = _open(tmp_path / "now.sqlite3", busy_timeout_ms=100)
    with _held_lock(store.path):
        with pytest.raises(NotNow):
            store.write_now(_turn(store, 1))
        with pytest.raises(PersistenceFailed) as failed:
            _turn(store, 1)()
    assert failed.value.reason == "locked"
    assert _turns(store.path) == 0
    store.close()


def test_write_now_declines_while_another_thread_is_inside_the_store(tmp_path: Path) -> None:
    store = _open(tmp_path / "now.sqlite3")
    inside, leave = threading.Event(), threading.Event()

    def block() -> None:
        with store.atomic_writes():
            store.append_audits("s", [(None, "held", {})])
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=block)
    worker.start()
    assert inside.wait(10)
    try:
        with pytest.raises(NotNow):
            store.write_now(_turn(store, 1))
    finally:
        leave.set()
        worker.join()
    store.write_now(_turn(store, 1))
    assert [a["event"] for a in store.list_audit_logs("s")] == ["held", "turn_started"]
    store.close()


class _OwnGroups(SQLiteSessionStore):
    @contextlib.contextmanager
    def atomic_writes(self) -> Iterator[None]:
        with super().atomic_writes():
            yield


class _Subclass(SQLiteSessionStore):
    pass


@pytest.mark.parametrize(
    "opened",
    [
        lambda path: SQLiteSessionStore(path, synchronous="FULL"),
        lambda path: SQLiteSessionStore(path, synchronous="EXTRA"),
        lambda path: SQLiteSessionStore(path, read_only=True),
        _OwnGroups,
        _Subclass,
    ],
    ids=["full", "extra", "read_only", "atomic_writes_overridden", "subclass"],
)
def test_write_now_is_never_used_where_a_commit_may_wait_or_do_more(
    tmp_path: Path, opened: Callable[[Path], SQLiteSessionStore]
) -> None:
    path = tmp_path / "now.sqlite3"
    _open(path).close()
    store = opened(path)
    with pytest.raises(NotNow) as declined:
        store.write_now(_turn(store, 1))
    assert declined.value.__cause__ is None  # declined before touching the file
    assert _turns(path) == 0
    store.close()


def test_a_read_only_store_declines_and_the_usual_write_fails_as_read_only(
    tmp_path: Path,
) -> None:
    path = tmp_path / "now.sqlite3"
    _open(path).close()
    store = SQLiteSessionStore(path, read_only=True)
    with pytest.raises(NotNow):
        store.write_now(_turn(store, 1))
    with pytest.raises(PersistenceFailed) as failed:
        _turn(store, 1)()
    assert failed.value.reason == "read_only"
    store.close()


def test_a_full_file_rolls_write_now_back_and_the_usual_write_fails_as_disk_full(
    tmp_path: Path,
) -> None:
    path = tmp_path / "now.sqlite3"
    _open(path).close()
    store = SQLiteSessionStore(path, max_size_bytes=path.stat().st_size + 4096)
    big = "x" * 60_000
    with pytest.raises(NotNow) as declined:
        store.write_now(_turn(store, 1, big))
    assert isinstance(declined.value.__cause__, PersistenceFailed)
    assert _turns(path) == 0
    assert store.list_audit_logs("s") == []
    with pytest.raises(PersistenceFailed) as failed:
        _turn(store, 1, big)()
    assert failed.value.reason == "disk_full"
    store.write_now(_turn(store, 1))  # a write that fits goes through
    assert _turns(path) == 1
    store.close()


def _damage_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with garbage (the schema stays readable)."""
    side = sqlite3.connect(path)
    side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = side.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    page_size = side.execute("PRAGMA page_size").fetchone()[0]
    side.close()
    with path.open("r+b") as file:
        file.seek((root[0] - 1) * page_size)
        file.write(bytes((i * 37 + 11) % 256 for i in range(page_size)))


def test_damaged_pages_are_confirmed_by_the_usual_write_not_on_the_calling_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "now.sqlite3"
    store = _open(path)
    _turn(store, 1)()
    store.close()
    broken = SQLiteSessionStore(path)  # damaged after it opened: a damaged file is not opened
    _damage_table(path, "turns")
    checked: list[str] = []
    sound = broken._file_is_sound

    def noted() -> bool:
        checked.append("check")
        return sound()

    broken._file_is_sound = noted  # type: ignore[method-assign]
    with pytest.raises(NotNow) as declined:
        broken.write_now(_turn(broken, 2))
    assert isinstance(declined.value.__cause__, PersistenceFailed)
    assert checked == []  # the integrity check is the usual write's, off the loop
    with pytest.raises(PersistenceFailed) as failed:
        _turn(broken, 2)()
    assert failed.value.reason == "corrupt"
    assert checked == ["check"]
    broken.close()


def _wal_progress(path: Path) -> tuple[int, int]:
    """``(frames in the WAL, frames copied back)``, read from the wal-index file
    (``mxFrame`` and ``nBackfill``: https://sqlite.org/walformat.html)."""
    index = Path(f"{path}-shm").read_bytes()
    return (
        int.from_bytes(index[16:20], sys.byteorder),
        int.from_bytes(index[96:100], sys.byteorder),
    )


def test_write_now_never_checkpoints_and_declines_once_a_checkpoint_is_due(
    tmp_path: Path,
) -> None:
    store = _open(tmp_path / "now.sqlite3")
    full = SQLiteSessionStore(tmp_path / "full.sqlite3", synchronous="FULL")
    assert store._connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert full._connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    full.close()
    text = "twelve kilobytes of message " * 440
    for index in range(1, CHECKPOINT_COMMITS):  # _open's write was the first commit
        store.write_now(_turn(store, index, text))
    frames, copied = _wal_progress(store.path)
    assert frames > 1000 and copied == 0  # past SQLite's own threshold, untouched
    with pytest.raises(NotNow) as declined:
        store.write_now(_turn(store, CHECKPOINT_COMMITS))
    assert declined.value.__cause__ is None
    store.append_audits("s", [(None, "usual", {})])  # commits, then checkpoints
    frames, copied = _wal_progress(store.path)
    assert copied == frames > 1000
    store.write_now(_turn(store, CHECKPOINT_COMMITS + 1))  # no longer due
    assert _turns(store.path) == CHECKPOINT_COMMITS  # 99 turns, then the last one
    store.close()
