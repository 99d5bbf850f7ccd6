"""The reading commands read what is left of a damaged store file, read-only, and leave
the file as it was; the writing commands still refuse it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.cli.cli_helpers import Invoke


def _damage_the_end(path: Path) -> None:
    """Overwrite the last leaf pages of the audit table: the newest session's audits.

    The pages are picked through SQLite's ``dbstat`` table, so the damage always lands on
    audit rows of the newest session and never on an index or on an older session's rows
    (whichever pages happen to sit at the end of the file can be either).
    """
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        leaves = conn.execute(
            "SELECT pageno, ncell FROM dbstat WHERE name = 'audit_logs' AND pagetype = 'leaf' "
            "ORDER BY path"
        ).fetchall()[-2:]
        # The last leaves in key order hold the highest ids: the newest session's rows,
        # as long as it has at least as many rows as those leaves hold.
        (newest_rows,) = conn.execute(
            "SELECT count(*) FROM audit_logs WHERE session_id = "
            "(SELECT session_id FROM audit_logs ORDER BY id DESC LIMIT 1)"
        ).fetchone()
    assert len(leaves) == 2 and sum(cells for _, cells in leaves) <= newest_rows
    with path.open("r+b") as file:
        for page, _ in leaves:
            file.seek((page - 1) * page_size)
            file.write(b"\xff" * page_size)


def test_sessions_list_and_export_read_a_damaged_file_read_only(
    home: Path, cli_process: Invoke
) -> None:
    for _ in range(3):
        assert cli_process("demo", "--fast").exit_code == 0
    db = home / "agent-lab.sqlite3"
    _damage_the_end(db)
    before = hashlib.md5(db.read_bytes()).hexdigest()

    listed = cli_process("sessions", "list", "--json")

    assert listed.exit_code == 0, listed.stderr
    sessions = json.loads(listed.stdout)
    assert len(sessions) >= 3
    exported = cli_process("sessions", "export", str(sessions[-1]["id"]))
    assert exported.exit_code == 0, exported.stderr
    assert json.loads(exported.stdout)["session"]["session_id"] == sessions[-1]["id"]
    assert hashlib.md5(db.read_bytes()).hexdigest() == before  # never written to
    refused = cli_process("run", "--session", str(sessions[-1]["id"]), "hello")
    assert refused.exit_code != 0 and "malformed" in refused.stderr
