"""Opening a store file: checking, configuring and (when needed) migrating it.

``open_connection`` is what ``StoreCore`` (``connection``) calls to get its one
connection, and again to replace it after a confirmed-sound file confused it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal, get_args

from agent_lab.domain.errors import PersistenceFailed, StoreFormatError, UsageError
from agent_lab.infrastructure.sqlite.access import not_writable
from agent_lab.infrastructure.sqlite.errors import (
    classify_os_error,
    classify_sqlite_error,
    map_open_errors,
)
from agent_lab.infrastructure.sqlite.reading import (
    needs_shared_memory_file,
    read_only_target,
    refuse_damaged,
    require_no_pending_log,
)
from agent_lab.infrastructure.sqlite.schema import (
    SCHEMA_VERSION,
    check_file_header,
    migrate,
    read_version,
    rollback_quietly,
)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
"""SQLite ``PRAGMA synchronous`` levels accepted by the store."""

MEMORY: Final = ":memory:"
"""The path of a store that lives in process memory (``InMemorySessionStore``)."""

_OPEN_RETRY_SECONDS: Final = 0.01
_NO_SYNC_ON_COMMIT: Final = frozenset({"OFF", "NORMAL"})


def writes_now(options: Options, memory: bool) -> bool:
    """Whether the store may run short writes on the caller's thread (``write_now``):
    not when a commit waits for the disk (``FULL``, ``EXTRA``), nor when read-only.

    Such a store's connection runs no automatic checkpoint (a checkpoint syncs the file
    and copies the WAL back: not a thing to do on the event loop); the store runs
    its own from the writes that may wait (``connection``).
    """
    return not options.read_only and (memory or options.synchronous.upper() in _NO_SYNC_ON_COMMIT)


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    busy_timeout_ms: int
    synchronous: str
    read_only: bool
    max_size_bytes: int | None

    def validate(self) -> None:
        if self.busy_timeout_ms < 0:
            raise UsageError(f"busy_timeout_ms must be >= 0, not {self.busy_timeout_ms}")
        if self.synchronous.upper() not in get_args(Synchronous):
            raise UsageError(
                f"synchronous must be one of {get_args(Synchronous)}, not {self.synchronous!r}"
            )
        if self.max_size_bytes is not None and self.max_size_bytes <= 0:
            raise UsageError(f"max_size_bytes must be positive, not {self.max_size_bytes}")


def open_connection(
    path: Path, options: Options, *, check_pages: bool = True
) -> sqlite3.Connection:
    """Open, check and (when needed) migrate the store at ``path``; return the connection.

    Opening waits for other stores opening or migrating the same file (up to
    ``busy_timeout_ms``) instead of failing as ``locked``. A store opened for writing
    first checks the file's pages (``reading.refuse_damaged``) unless ``check_pages``
    is false (the caller has just found the file sound); one opened for reading only
    reads the file as ``reading`` describes.
    """
    memory = str(path) == MEMORY
    if not memory:
        _prepare_path(path, options.read_only)
        check_file_header(path)
    with map_open_errors(path):
        if options.read_only:
            return _open_read_only(path, options)
        if not memory and check_pages:
            _patiently(lambda: refuse_damaged(path, options.busy_timeout_ms / 1000), options)
        return _configured(_connect(path, options, memory), path, options, memory)


def _prepare_path(path: Path, read_only: bool) -> None:
    if read_only:
        if not path.is_file():
            raise StoreFormatError(f"there is no session store at {path}")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PersistenceFailed(
            classify_os_error(exc), f"cannot create the directory {path.parent}: {exc}"
        ) from exc
    problem = not_writable(path) if path.is_file() else None
    if problem is not None:  # before SQLite opens it read-only, quietly, and adds files
        raise PersistenceFailed("read_only", f"cannot open {path}: {problem} (nothing was changed)")


def _open_read_only(path: Path, options: Options) -> sqlite3.Connection:
    try:
        return _configured(_connect(path, options, False), path, options, False)
    except sqlite3.Error as exc:
        if not needs_shared_memory_file(exc):
            raise
        require_no_pending_log(path, exc)
    return _configured(_connect(path, options, False, immutable=True), path, options, False)


def _configured(
    conn: sqlite3.Connection, path: Path, options: Options, memory: bool
) -> sqlite3.Connection:
    try:
        _configure_patiently(conn, path, options, memory)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect(
    path: Path, options: Options, memory: bool, *, immutable: bool = False
) -> sqlite3.Connection:
    target: str | Path = MEMORY if memory else path
    if options.read_only:
        target = read_only_target(path, immutable=immutable)
    return sqlite3.connect(
        target,
        timeout=options.busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        uri=options.read_only,
    )


def _configure_patiently(
    conn: sqlite3.Connection, path: Path, options: Options, memory: bool
) -> None:
    _patiently(lambda: _configure(conn, path, options, memory), options, conn)


def _patiently(
    action: Callable[[], None], options: Options, conn: sqlite3.Connection | None = None
) -> None:
    """``action``, retried while another connection switches the file to WAL.

    SQLite returns ``SQLITE_BUSY`` without calling the busy handler when a journal-mode
    change or WAL recovery races another connection, so the busy timeout alone does not
    cover a crowd of stores opening one new file.
    """
    deadline = time.monotonic() + options.busy_timeout_ms / 1000
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if classify_sqlite_error(exc) != "locked" or time.monotonic() >= deadline:
                raise
            if conn is not None:
                rollback_quietly(conn)
            time.sleep(_OPEN_RETRY_SECONDS)


def _configure(conn: sqlite3.Connection, path: Path, options: Options, memory: bool) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(options.busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    version = read_version(conn, path)  # before anything could write to the file
    if options.read_only:
        if version == 0:
            raise StoreFormatError(f"there is no session store at {path} (the file is empty)")
        if version < SCHEMA_VERSION:
            raise StoreFormatError(
                f"{path} has session store schema version {version}, older than the "
                f"version {SCHEMA_VERSION} this Agent Lab reads, and upgrading it writes to "
                "the file, which a read-only open never does; open it once with write "
                "access (without read_only) to upgrade it (the file was left unchanged)"
            )
        return
    if not memory:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
    if not memory and writes_now(options, memory):
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    if version < SCHEMA_VERSION:  # an up-to-date file is opened without writing to it
        migrate(conn, path)
    if options.max_size_bytes is not None:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = max(1, options.max_size_bytes // page_size)
        conn.execute(f"PRAGMA max_page_count = {pages}")
