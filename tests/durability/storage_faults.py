"""Real SQLite faults applied to a real store file at one chosen write site.

``FaultInjectingStore`` delegates every call to a real ``SQLiteSessionStore``. When the
chosen method is called for the chosen time, it first puts the file into a real fault
state and makes that one call against it:

* ``locked`` — a second connection holds ``BEGIN EXCLUSIVE`` for the whole call;
* ``disk_full`` — the small private file system holding the store is filled to the
  last byte (the test runs in its own mount namespace on a tiny tmpfs);
* ``read_only`` — the call runs on a ``mode=ro`` connection to the same file;
* ``corrupt`` — the file's pages after the header are overwritten, the call runs on a
  fresh connection, then the original bytes are put back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

SITES: dict[str, str] = {
    "session_start": "ensure_session",
    "turn_start_and_user_message": "start_turn",
    "tool_call_block": "open_batch",
    "dispatch": "mark_dispatched",
    "result": "record_result",
    "batch_commit": "commit_batch",
    "answer": "append_messages",
    "audit": "append_audits",
    "usage": "append_usages",
    "turn_close": "complete_turn",
}
FAULTS = ("locked", "disk_full", "read_only", "corrupt")


class FaultInjectingStore:
    def __init__(self, path: Path, site: str, fault: str, occurrence: int = 1) -> None:
        self.path = path
        self.inner = SQLiteSessionStore(path, busy_timeout_ms=150)
        self.method = SITES[site]
        self.fault = fault
        self.occurrence = occurrence
        self.calls = 0
        self.injected = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name != self.method or not callable(target):
            return target
        return self._maybe_faulty(name)

    def _maybe_faulty(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls != self.occurrence:
                return getattr(self.inner, name)(*args, **kwargs)
            self.injected += 1
            with self._faulty_store() as store:
                return getattr(store, name)(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def _faulty_store(self) -> Iterator[Any]:
        if self.fault == "locked":
            with _held_lock(self.path):
                yield self.inner
        elif self.fault == "read_only":
            reader = SQLiteSessionStore(self.path, read_only=True)
            try:
                yield reader
            finally:
                reader.close()
        elif self.fault == "disk_full":
            with _full_file_system(self.path):
                yield self.inner
        else:
            with _corrupted_file(self.path) as broken:
                yield broken


@contextlib.contextmanager
def _held_lock(path: Path) -> Iterator[None]:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextlib.contextmanager
def _full_file_system(path: Path) -> Iterator[None]:
    """Fill the (small, private) file system holding ``path`` until writes fail.

    A full disk alone does not fail every SQLite write: a WAL that has room left (a
    checkpointed WAL is written again from its start) takes the next frames without a
    new byte of disk. So once the disk is full, a side connection commits small rows
    until SQLite itself reports the disk full; then no room is left for the store's
    write either. The probe rows are dropped afterwards.
    """
    filler = path.parent / "fault-filler.bin"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 4096, 512, 1):
            block = b"\0" * size
            with contextlib.suppress(OSError):
                while True:
                    os.write(descriptor, block)
    finally:
        os.close(descriptor)
    side = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        _use_up_the_wal(side)
        yield
    finally:
        filler.unlink()
        with contextlib.suppress(sqlite3.Error):
            side.execute("DROP TABLE IF EXISTS fault_probe")
        side.close()


def _use_up_the_wal(side: sqlite3.Connection) -> None:
    side.execute("PRAGMA busy_timeout = 5000")
    for _ in range(10_000):
        try:
            side.execute("CREATE TABLE IF NOT EXISTS fault_probe (body BLOB)")
            side.execute("INSERT INTO fault_probe VALUES (zeroblob(512))")
        except sqlite3.OperationalError as exc:
            if "full" in str(exc):
                return
            raise
    raise AssertionError("the store's file system never filled up")


@contextlib.contextmanager
def _corrupted_file(path: Path) -> Iterator[Any]:
    side = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    side.close()
    original = path.read_bytes()
    page_size = int.from_bytes(original[16:18], "big") or 65536
    garbage = bytes((i * 37 + 11) % 256 for i in range(len(original) - page_size))
    path.write_bytes(original[:page_size] + garbage)
    broken: Any = None
    try:
        broken = SQLiteSessionStore(path, busy_timeout_ms=150)
        yield broken
    except Exception:
        raise
    finally:
        if broken is not None:
            broken.close()
        path.write_bytes(original)
