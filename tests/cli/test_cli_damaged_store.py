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
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(size - 4096 * 3)
        file.write(b"\xff" * 4096 * 2)  # two pages near the end (audit data)


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
