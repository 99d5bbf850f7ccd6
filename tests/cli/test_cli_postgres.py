"""With a PostgreSQL store configured, every command that reads sessions reads it.

``AGENT_LAB_DATABASE_URL`` (or ``database_url`` in a config file) names the store of
``run`` and of ``sessions list/show/export/delete/prune`` and ``replay`` alike; none of
them falls back to an SQLite file. Real CLI processes on a throwaway PostgreSQL server.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from agent_lab.testing.postgres_server import PostgresServer
from tests.cli.cli_helpers import Invoke

_databases = itertools.count(1)


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.create_database(f"cli_{next(_databases)}")


def _no_sqlite_file(home: Path) -> None:
    """No session database in SQLite: not the default file, nor any with a sessions table
    (the built-in tools keep their own state in SQLite files of the data directory)."""
    assert not (home / "agent-lab.sqlite3").exists()
    for path in home.rglob("*.sqlite3"):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "sessions" not in tables, path


def test_every_session_command_reads_the_postgresql_store_run_writes(
    cli_process: Invoke, home: Path, database_url: str
) -> None:
    env = {"AGENT_LAB_DATABASE_URL": database_url}
    first = cli_process("run", "Set the volume to 30", "--json", **env)
    assert first.exit_code == 0, first.stderr
    session_id = str(json.loads(first.stdout.splitlines()[0])["session_id"])
    second = cli_process("run", "Now search for BM25", "--session", session_id[:8], **env)
    assert second.exit_code == 0, second.stderr

    listed = cli_process("sessions", "list", "--json", **env)
    shown = cli_process("sessions", "show", session_id[:8], **env)
    exported = cli_process("sessions", "export", session_id, **env)
    replayed = cli_process("replay", session_id, "--speed", "0", "--quiet", **env)

    assert listed.exit_code == 0, listed.stderr
    assert [session["id"] for session in json.loads(listed.stdout)] == [session_id]
    assert shown.exit_code == 0, shown.stderr
    assert "turn 2 · completed" in shown.stdout and "you› Now search for BM25" in shown.stdout
    assert exported.exit_code == 0, exported.stderr
    assert [turn["turn_index"] for turn in json.loads(exported.stdout)["turns"]] == [1, 2]
    assert replayed.exit_code == 0, replayed.stdout + replayed.stderr
    assert "identical: 2 turn(s)" in replayed.stdout
    _no_sqlite_file(home)

    deleted = cli_process("sessions", "delete", session_id, "--yes", **env)

    assert deleted.exit_code == 0, deleted.stderr
    with PostgresSessionStore(database_url) as store:
        assert store.get_session(session_id) is None
    assert json.loads(cli_process("sessions", "list", "--json", **env).stdout) == []
    _no_sqlite_file(home)


def test_prune_and_a_config_file_database_url_use_the_postgresql_store(
    cli_process: Invoke, home: Path, database_url: str
) -> None:
    config = home / "lab.toml"
    config.write_text(f'[agent_lab]\ndatabase_url = "{database_url}"\n')
    run = cli_process("run", "Hello", "--config", str(config))
    assert run.exit_code == 0, run.stderr

    listed = cli_process("sessions", "list", "--config", str(config))
    pruned = cli_process(
        "sessions", "prune", "--older-than", "0s", "--yes", "--config", str(config)
    )

    assert listed.exit_code == 0 and "Hello" in listed.stdout
    assert pruned.exit_code == 0, pruned.stderr
    assert "deleted 1 session(s)" in pruned.stdout
    with PostgresSessionStore(database_url) as store:
        assert store.list_sessions() == []
    _no_sqlite_file(home)
