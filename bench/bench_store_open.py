"""Benchmark: opening an SQLite store for writing, with and without its page check.

Run from the project root::

    .venv/bin/python -m bench --only store_open

A store opened for writing first runs ``PRAGMA quick_check`` over the whole file, so a
damaged file is refused before anything is written to it (``docs/durability.md``, 10).
This measures what that costs: stores of several sizes (a session's transcript rows,
written with plain SQL to reach the size fast) are opened and closed five times each
with the check and five times without (``open_connection(..., check_pages=False)``),
after one warm-up open, so the file's pages are in the page cache (a cold cache adds
the time to read the file once). Wall time, median of the five.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from agent_lab.infrastructure.sqlite.opening import Options, open_connection
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from bench._common import Check, Report, median, table

_OPTIONS = Options(5000, "NORMAL", False, None)


def _store_of(path: Path, megabytes: int) -> float:
    with SQLiteSessionStore(path) as store:
        store.create_session("t", {}, session_id="s")
    conn = sqlite3.connect(path, isolation_level=None)
    rows = megabytes * 250  # about 4 KB of text each
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
        " INSERT INTO messages (session_id, seq, turn_index, role, content, tool_calls,"
        " created_at) SELECT 's', i, i / 10, 'user', hex(randomblob(2000)), '[]',"
        " '2026-01-01T00:00:00.000+00:00' FROM n",
        (rows,),
    )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size / 1e6


def _open_and_close(path: Path, *, check_pages: bool) -> None:
    open_connection(path, _OPTIONS, check_pages=check_pages).close()


def _median_ms(action: Callable[[], None], repeats: int = 5) -> float:
    action()  # warm-up: the pages come into the page cache
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return median(times) * 1000


def run(quick: bool) -> Report:
    sizes = (1,) if quick else (1, 10, 50, 100)
    rows, figures = [], {}
    with tempfile.TemporaryDirectory() as directory:
        for megabytes in sizes:
            path = Path(directory) / f"store-{megabytes}.sqlite3"
            size = _store_of(path, megabytes)
            checked = _median_ms(partial(_open_and_close, path, check_pages=True))
            unchecked = _median_ms(partial(_open_and_close, path, check_pages=False))
            figures[f"checked_ms_{megabytes}mb"] = checked
            figures[f"unchecked_ms_{megabytes}mb"] = unchecked
            rows.append((f"{size:.1f} MB", f"{checked:.1f}", f"{unchecked:.1f}"))
    markdown = (
        "Opening and closing a store for writing, wall ms, median of 5 after a warm-up "
        "open (pages in the page cache):\n\n"
        + table(["file", "with the page check", "without"], rows, left=1)
    )
    largest = sizes[-1]
    checks = [
        Check(
            "store_open",
            f"open for writing, {largest} MB file (page check)",
            f"{figures[f'checked_ms_{largest}mb']:.0f} ms",
            "",
            None,
        )
    ]
    return Report(
        "Session store: opening a file for writing (the page check)",
        ".venv/bin/python -m bench --only store_open",
        markdown,
        checks,
        figures,
    )


if __name__ == "__main__":
    print(run(quick=False).markdown)
