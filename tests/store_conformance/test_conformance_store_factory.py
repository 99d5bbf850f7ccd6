"""``open_store`` picks the adapter from the location; the lab's settings select it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.store_factory import open_store
from agent_lab.interfaces.settings import load_settings
from tests.store_conformance.conformance_support import PostgresBackend


def test_paths_and_sqlite_urls_open_the_sqlite_store(tmp_path: Path) -> None:
    for location in (tmp_path / "a.sqlite3", f"sqlite:///{tmp_path}/b.sqlite3"):
        store = open_store(location)
        try:
            assert isinstance(store, SQLiteSessionStore)
            assert store.path.parent == tmp_path
        finally:
            store.close()
    with pytest.raises(ConfigError, match="mysql"):
        open_store("mysql://x/y")


def test_a_postgresql_url_opens_the_postgres_store(postgres: PostgresBackend) -> None:
    store = open_store(postgres.url)
    try:
        assert isinstance(store, PostgresSessionStore)
        session = store.create_session("t", {})
        assert store.get_session(session) is not None
    finally:
        store.close()


def test_the_environment_or_config_selects_the_database_url(tmp_path: Path) -> None:
    url = "postgresql://lab:secret@db.internal/agent_lab"
    settings = load_settings(environ={"AGENT_LAB_DATABASE_URL": url, "AGENT_LAB_DB": "x.db"})
    assert settings.store_location() == url
    assert "secret" not in repr(settings)
    config = tmp_path / "lab.toml"
    config.write_text(f'[agent_lab]\ndatabase_url = "{url}"\n')
    assert load_settings(config_file=config, environ={}).store_location() == url
    assert load_settings(environ={"AGENT_LAB_DB": str(tmp_path / "x.db")}).store_location() == (
        tmp_path / "x.db"
    )
