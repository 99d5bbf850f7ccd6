"""Translate ``sqlite3`` exceptions into Agent Lab store errors, once, at the boundary.

Every call into ``sqlite3`` made by the SQLite store runs inside ``map_sqlite_errors()``,
so no ``sqlite3.*`` exception leaves ``agent_lab.infrastructure``. Classification looks
at SQLite's result code first and at the message text second, and it tests corruption
before anything else: ``database disk image is malformed`` contains the word *disk*
but says nothing about disk space.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_lab.domain.errors import PersistenceFailed, PersistenceFailure, StoreFormatError
from agent_lab.infrastructure.sqlite.access import on_read_only_file_system
from agent_lab.infrastructure.sqlite.reading import access_problem

# Primary SQLite result codes (https://sqlite.org/rescode.html).
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_READONLY = 8
_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_NOTADB = 26

_CODE_REASONS: dict[int, PersistenceFailure] = {
    _SQLITE_CORRUPT: "corrupt",
    _SQLITE_NOTADB: "corrupt",
    _SQLITE_BUSY: "locked",
    _SQLITE_LOCKED: "locked",
    _SQLITE_FULL: "disk_full",
    _SQLITE_READONLY: "read_only",
}

# Checked in this order: corruption wording first, because it mentions "disk".
_TEXT_REASONS: tuple[tuple[PersistenceFailure, tuple[str, ...]], ...] = (
    ("corrupt", ("malformed", "not a database", "corrupt")),
    ("locked", ("locked", "busy")),
    ("disk_full", ("database or disk is full", "disk is full", "no space left")),
    ("read_only", ("readonly", "read-only", "read only")),
)


def classify_sqlite_error(exc: sqlite3.Error) -> PersistenceFailure:
    """Return the ``PersistenceFailed`` reason that describes ``exc``."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _CODE_REASONS:
        return _CODE_REASONS[code & 0xFF]
    text = str(exc).lower()
    for reason, needles in _TEXT_REASONS:
        if any(needle in text for needle in needles):
            return reason
    return "unknown"


_ERRNO_REASONS: dict[int, PersistenceFailure] = {
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.EROFS: "read_only",
    errno.EACCES: "read_only",
    errno.EPERM: "read_only",
}


def classify_os_error(exc: OSError) -> PersistenceFailure:
    """Return the ``PersistenceFailed`` reason for a file-system error."""
    return _ERRNO_REASONS.get(exc.errno or 0, "unknown")


def _is_not_a_database(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return (code & 0xFF) == _SQLITE_NOTADB
    return "not a database" in str(exc).lower()


def _detail(reason: PersistenceFailure, exc: sqlite3.Error) -> str:
    text = str(exc)
    # A lock is about a busy writer; keep any wording about disks out of its message.
    if reason == "locked" and "disk" in text.lower():
        return "the write lock was not granted within the busy timeout"
    return text


def persistence_failed(exc: sqlite3.Error) -> PersistenceFailed:
    """Build the classified ``PersistenceFailed`` for ``exc`` (not raised)."""
    reason = classify_sqlite_error(exc)
    return PersistenceFailed(reason, _detail(reason, exc))


@contextmanager
def map_sqlite_errors() -> Iterator[None]:
    """Re-raise any ``sqlite3.Error`` raised in the block as ``PersistenceFailed``.

    Other exceptions pass through untouched.

    Raises:
        PersistenceFailed: with ``reason`` one of ``locked``, ``disk_full``,
            ``read_only``, ``corrupt`` or ``unknown``; the ``sqlite3`` error is chained
            as ``__cause__``.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise persistence_failed(exc) from exc


@contextmanager
def map_open_errors(path: Path) -> Iterator[None]:
    """Like ``map_sqlite_errors()``, for the statements that open and check a store.

    A file SQLite does not recognise as a database (``SQLITE_NOTADB``) becomes
    ``StoreFormatError`` naming the file; a store whose pages are damaged
    (``SQLITE_CORRUPT``) is ``PersistenceFailed("corrupt")`` naming the file, like any
    later read or write of it; failing to open a file on a read-only file system, or
    one this user may not read or whose directory it may not write, becomes
    ``PersistenceFailed("read_only")`` naming the path and the cause.

    Raises:
        StoreFormatError: the file is not an SQLite database.
        PersistenceFailed: any other failure, classified.
    """
    try:
        yield
    except sqlite3.Error as exc:
        reason = classify_sqlite_error(exc)
        if _is_not_a_database(exc):
            raise StoreFormatError(
                f"{path} is not an Agent Lab session store ({exc}); the file was left unchanged"
            ) from exc
        if reason == "corrupt":
            raise PersistenceFailed("corrupt", f"{path}: {exc}") from exc
        if reason in ("unknown", "read_only") and on_read_only_file_system(path):
            raise PersistenceFailed(
                "read_only", f"{path} is on a read-only file system ({exc})"
            ) from exc
        problem = access_problem(path) if reason in ("unknown", "read_only") else None
        if problem is not None:
            raise PersistenceFailed("read_only", f"cannot open {path}: {problem} ({exc})") from exc
        raise PersistenceFailed(reason, _detail(reason, exc)) from exc


def taken_over(session_id: str, holder: Sequence[Any] | None) -> PersistenceFailed:
    """The fence's refusal; ``holder`` is the claim's owner, pid and host, if any."""
    who = "nobody" if holder is None else f"{holder[0]} (pid {holder[1]} on {holder[2]})"
    return PersistenceFailed(
        "taken_over", f"session {session_id!r} is now held by {who}; nothing was written"
    )


def deleted_under_claim(session_id: str) -> PersistenceFailed:
    """A write of a session this store claimed, after something deleted the session."""
    return PersistenceFailed(
        "deleted", f"session {session_id!r} no longer exists; nothing was written"
    )
