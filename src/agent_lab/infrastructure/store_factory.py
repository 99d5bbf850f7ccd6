"""``open_store``: the session store a location names, SQLite or PostgreSQL.

For example::

    store = open_store("postgresql://lab@db.internal/agent_lab")  # PostgresSessionStore
    store = open_store("sqlite:////var/lib/agent-lab/lab.sqlite3")  # SQLiteSessionStore
    store = open_store(Path("~/.agent_lab/lab.sqlite3"))             # SQLiteSessionStore

A ``postgresql://`` (or ``postgres://``) URL opens the PostgreSQL store (the
``postgres`` extra); ``sqlite:///`` URLs and plain paths open the embedded SQLite
store, the default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import ConfigError

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
SQLITE_SCHEME: Final = "sqlite:///"
"""Then the path, as SQLAlchemy writes it: ``sqlite:///relative`` or ``sqlite:////abs``."""


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database."""
    return isinstance(location, str) and location.lower().startswith(POSTGRES_SCHEMES)


def sqlite_path(location: str | os.PathLike[str]) -> Path:
    """The file of an SQLite location (a path, or a ``sqlite:///`` URL)."""
    text = os.fspath(location)
    if text.lower().startswith(SQLITE_SCHEME):
        text = text[len(SQLITE_SCHEME) :]
    return Path(text).expanduser()


def open_store(location: str | os.PathLike[str], *, read_only: bool = False) -> SessionStore:
    """Open the store at ``location`` (see the module docstring).

    ``read_only`` opens an SQLite file for reading only (its writes then fail as
    ``PersistenceFailed("read_only")``); a PostgreSQL store opens as usual, since an up
    to date one is opened without writing.

    Raises:
        ConfigError: a PostgreSQL URL without the ``postgres`` extra installed, or an
            unknown URL scheme.
        StoreFormatError, PersistenceFailed: as the store's constructor.
    """
    if is_postgres_url(location):
        try:
            from agent_lab.infrastructure.postgres.store import PostgresSessionStore
        except ImportError as exc:
            raise ConfigError(
                f"a PostgreSQL store needs the postgres extra: pip install 'agent-lab[postgres]'"
                f" ({exc})"
            ) from None
        return PostgresSessionStore(str(location))
    text = os.fspath(location)
    if "://" in text and not text.lower().startswith(SQLITE_SCHEME):  # also sqlite://host
        scheme = text.split("://", 1)[0]
        raise ConfigError(f"unknown database URL scheme {scheme!r}: use postgresql:// or a path")
    from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

    return SQLiteSessionStore(sqlite_path(location), read_only=read_only)
