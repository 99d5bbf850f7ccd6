"""Opening a store file for reading only, and checking a file's pages before writing.

**Reading only** (``read_only=True``) never writes to the store file. A WAL-mode file
is read through SQLite's ``mode=ro`` (which, like any reader, creates the ``-shm`` index
and an empty ``-wal`` next to the file when it may), and so it sees every
commit, also those still in the ``-wal`` file of a writer that has the store open, as
long as SQLite can open (or create) the ``-shm`` index next to it. When it cannot —
the directory is not writable by this user, or is on read-only media — and there is
no ``-wal`` file with commits in it, every commit is in the main file, and the file is
read with ``immutable=1``: SQLite then takes no locks and reads the main file as it is.
That is a snapshot for files nobody writes meanwhile (another user's store at rest, an
archive, a read-only mount); should the owner write to it while it is read, the
reader may see a mixture and must open it again. A ``-wal`` file with commits that
cannot be read that way is refused (``PersistenceFailed("read_only")``, naming the
files), never silently left out.

**Checking pages** (``damage``): before a store opened for writing writes anything,
``PRAGMA quick_check`` reads every page of the file once, so a file whose pages are
damaged is refused as ``corrupt`` and left byte-for-byte unchanged. It costs about 2 ms
per MB of file whose pages are in the page cache (``bench/bench_store_open.py``).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Final

from agent_lab.domain.errors import PersistenceFailed
from agent_lab.infrastructure.sqlite.access import no_new_files

_SQLITE_CORRUPT: Final = 11
_SQLITE_CANTOPEN: Final = 14
_SQLITE_READONLY_RECOVERY: Final = 8 | (1 << 8)
_SQLITE_READONLY_CANTINIT: Final = 8 | (5 << 8)
_SQLITE_READONLY_DIRECTORY: Final = 8 | (6 << 8)
_NO_SHARED_MEMORY_FILE: Final = frozenset(
    {
        _SQLITE_CANTOPEN,
        _SQLITE_READONLY_RECOVERY,
        _SQLITE_READONLY_CANTINIT,
        _SQLITE_READONLY_DIRECTORY,
    }
)
"""What SQLite answers a ``mode=ro`` reader when it cannot open, create or (after a
crash) rebuild the ``-shm``."""


def read_only_target(path: Path, *, immutable: bool) -> str:
    """The URI that opens ``path`` for reading only (see the module docstring)."""
    return f"{path.absolute().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def needs_shared_memory_file(exc: sqlite3.Error) -> bool:
    """Whether a ``mode=ro`` read failed because the ``-shm`` could not be made."""
    return getattr(exc, "sqlite_errorcode", None) in _NO_SHARED_MEMORY_FILE


def require_no_pending_log(path: Path, exc: sqlite3.Error) -> None:
    """Refuse to read ``path`` as immutable when its ``-wal`` holds commits.

    Raises:
        PersistenceFailed: ``read_only``, naming the files and the directory.
    """
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size > 0
    except FileNotFoundError:
        return
    if pending:
        raise PersistenceFailed(
            "read_only",
            f"cannot read {path}: its write-ahead log {wal.name} holds commits that SQLite "
            f"can only read after creating {path.name}-shm in {path.parent}, which this user "
            "may not do; open the store once with write access (that folds the log into the "
            f"file), or copy the files to a writable folder ({exc})",
        ) from exc


def access_problem(path: Path) -> str | None:
    """Why this user cannot open ``path`` for writing, when the cause is permissions."""
    parent = path.parent
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if path.exists() and not os.access(path, os.R_OK):
        return f"permission denied: this user may not read {path}"
    if os.access(parent, os.W_OK | os.X_OK):
        return None
    if path.exists():
        return (
            f"{no_new_files(parent)}, and SQLite keeps {path.name}-wal and {path.name}-shm "
            "there while the store is open; open it read-only to read it"
        )
    return no_new_files(parent)


def damage(path: Path, timeout: float = 5.0) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong with the file at ``path`` (empty: sound).

    Read on connections of their own, so the store's connection keeps no page from it.
    Without a ``-wal`` file every commit is in the main file and nobody has it open, so
    the check reads it as immutable, which leaves nothing behind in the directory. When
    a writer may have come meanwhile (a ``-wal`` file appeared, or the file changed),
    the check is made again by a reader that takes SQLite's locks.

    Raises:
        sqlite3.Error: the file could not be read (``is_damage`` tells whether because
            its pages are damaged).
    """
    wal = path.with_name(path.name + "-wal")
    if not wal.exists():
        before = _version_of(path)
        try:
            problems = _quick_check(path, timeout, immutable=True)
        except sqlite3.Error:
            if not wal.exists() and _version_of(path) == before:
                raise
        else:
            if not wal.exists() and _version_of(path) == before:
                return problems
    try:
        return _quick_check(path, timeout, immutable=False)
    except sqlite3.Error as exc:
        if is_damage(exc) or not needs_shared_memory_file(exc):
            raise
        return _quick_check(path, timeout, immutable=True)


def _version_of(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _quick_check(path: Path, timeout: float, *, immutable: bool) -> list[str]:
    probe = sqlite3.connect(read_only_target(path, immutable=immutable), uri=True, timeout=timeout)
    try:
        rows = probe.execute("PRAGMA quick_check(3)").fetchall()
    finally:
        probe.close()
    return [" ".join(str(row[0]).split()) for row in rows if row[0] != "ok"]


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite failed because the file's pages are damaged (``SQLITE_CORRUPT``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) == _SQLITE_CORRUPT
    return "malformed" in str(exc).lower()


def refuse_damaged(path: Path, timeout: float = 5.0) -> None:
    """Refuse to write to a store file whose pages are damaged (see ``damage``).

    A missing or empty file (a new store) has no pages to check. ``timeout``: how long
    the check waits for a lock (seconds).

    Raises:
        PersistenceFailed: ``corrupt``, naming the file; nothing was written.
        sqlite3.Error: the file could not be read for another reason.
    """
    try:
        if path.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    try:
        problems = damage(path, timeout)
    except sqlite3.Error as exc:
        if not is_damage(exc):
            raise
        raise _damaged(path, str(exc)) from exc
    if problems:
        raise _damaged(path, "; ".join(problems))


def _damaged(path: Path, problem: str) -> PersistenceFailed:
    return PersistenceFailed(
        "corrupt",
        f"{path}: PRAGMA quick_check found damaged pages ({problem}); nothing was written "
        "and the file was left unchanged: restore it from a backup, or open it read-only "
        "to read what is left",
    )
