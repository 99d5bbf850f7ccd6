"""What a store does once the file at its path is no longer the file it opened.

Someone deleted the store file, or moved another file over it (``mv other.db
store.db``, a backup restored), while a store had it open. The store's connection still
reads and writes the *old* file (an unlinked inode, or one now at another name), so
every write from then on would vanish from what the user opens next. Worse, SQLite
keeps the old file's recent commits in ``<path>-wal``, which is still at the path: the
next program to open the new file there would apply that log to it, overwriting pages
of the new file with pages of the old one.

So, the first time a write finds the file replaced (``connection``), or when the store
closes, the store, off the event loop:

1. **saves what it holds**: ``VACUUM INTO`` a copy next to the path,
   ``<stem>.replaced-<UTC time><suffix>`` (or in the temporary directory when the
   folder takes no new file), so no committed turn is lost even when the old file was
   deleted;
2. **empties the stale log**: a ``TRUNCATE`` checkpoint copies the old file's log into
   the old file (an unlinked inode, or the file where it was moved: it becomes whole
   there) and empties ``<path>-wal``, so the new file at the path is read as it is;
3. refuses every later write with ``file_replaced``, naming the copy.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agent_lab.domain.errors import PersistenceFailed


@dataclass(frozen=True, slots=True)
class Replaced:
    """The outcome of ``rescue``: what happened at the path, and where the data went."""

    path: Path
    deleted: bool
    copy: Path | None
    problem: str = ""

    def failure(self) -> PersistenceFailed:
        """The ``file_replaced`` error every write of the store raises from now on."""
        what = "was deleted" if self.deleted else "was replaced by another file"
        if self.copy is not None:
            where = (
                f"everything this store had saved, up to its last completed write, is in "
                f"{self.copy} (open it with --db {self.copy})"
            )
        else:
            where = f"a copy of what this store had saved could not be written: {self.problem}"
        return PersistenceFailed(
            "file_replaced",
            f"{self.path} {what} after this store opened it, so nothing more is written "
            f"there; {where}; reopen the store to write to the file now at that path",
        )


def identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (``None``: there is none)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def rescue(conn: sqlite3.Connection, path: Path) -> Replaced:
    """Save what ``conn`` (open on the old file) holds, and empty the stale log.

    Runs outside any transaction of ``conn``. Best effort: a failure to copy is
    reported in the result (``problem``), never raised.
    """
    deleted = identity(path) is None
    copy, problem = _save_copy(conn, path)
    if copy is not None:  # the log's commits are in the copy: now keep them off the path
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Replaced(path, deleted, copy, problem)


def _save_copy(conn: sqlite3.Connection, path: Path) -> tuple[Path | None, str]:
    problems: list[str] = []
    for folder in (path.parent, Path(tempfile.gettempdir())):
        target = _free_name(folder, path)
        try:
            conn.execute("VACUUM INTO ?", (str(target),))
        except sqlite3.Error as exc:
            problems.append(f"{target}: {exc}")
            with contextlib.suppress(OSError):
                target.unlink(missing_ok=True)
            continue
        return target, ""
    return None, "; ".join(problems)


def _free_name(folder: Path, path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for number in range(1, 1000):
        extra = "" if number == 1 else f"-{number}"
        candidate = folder / f"{path.stem}.replaced-{stamp}{extra}{path.suffix}"
        if not candidate.exists():
            return candidate
    return folder / f"{path.stem}.replaced-{stamp}-{os.getpid()}{path.suffix}"
