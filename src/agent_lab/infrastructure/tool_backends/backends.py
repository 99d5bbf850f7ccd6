"""The real backends of the built-in tools, and where they keep their files.

``local_backends()`` is the composition default used by
``agent_lab.application.builtin_tools.builtin_tool_definitions``:

* notes, calendar entries and the device volume live in ``builtin-tools.sqlite3``
  in the data directory (WAL, ``synchronous=FULL``: durable when a handler returns);
* search is local full-text search (SQLite FTS5, bm25) over a folder of documents,
  by default the sample corpus bundled with Agent Lab, or over HTTP when a search URL
  is configured.

Environment:
    AGENT_LAB_HOME: the data directory (default: the platform's user data
        directory for ``agent-lab``).
    AGENT_LAB_CORPUS: a folder of ``.md``/``.markdown``/``.txt`` files to search
        instead of the bundled corpus.
    AGENT_LAB_SEARCH_URL: a SearXNG-style JSON search endpoint; selects HTTP search.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from agent_lab.application.builtin_tools import BuiltinBackends, SearchBackend
from agent_lab.infrastructure.tool_backends.http_search import HttpSearchBackend
from agent_lab.infrastructure.tool_backends.local_search import (
    LocalSearchBackend,
    bundled_corpus_dir,
)
from agent_lab.infrastructure.tool_backends.stores import (
    SQLiteCalendar,
    SQLiteDeviceState,
    SQLiteNoteBook,
)

__all__ = [
    "CORPUS_ENV",
    "HOME_ENV",
    "SEARCH_URL_ENV",
    "TOOLS_DATABASE_NAME",
    "HttpSearchBackend",
    "LocalSearchBackend",
    "SQLiteCalendar",
    "SQLiteDeviceState",
    "SQLiteNoteBook",
    "bundled_corpus_dir",
    "data_home",
    "local_backends",
]

HOME_ENV = "AGENT_LAB_HOME"
CORPUS_ENV = "AGENT_LAB_CORPUS"
SEARCH_URL_ENV = "AGENT_LAB_SEARCH_URL"
TOOLS_DATABASE_NAME = "builtin-tools.sqlite3"


def data_home() -> Path:
    """The lab's data directory, created if missing.

    ``AGENT_LAB_HOME`` when set, else ``platformdirs.user_data_dir("agent-lab")``.
    """
    configured = os.environ.get(HOME_ENV, "").strip()
    home = Path(configured).expanduser() if configured else Path(_platform_data_dir())
    home.mkdir(parents=True, exist_ok=True)
    return home


def _platform_data_dir() -> str:
    return platformdirs.user_data_dir("agent-lab")


def local_backends(
    data_dir: Path | None = None,
    *,
    search_url: str | None = None,
    corpus_dir: Path | None = None,
) -> BuiltinBackends:
    """The default backends, keeping their files under ``data_dir``.

    Nothing is opened here: files are created on first use.

    Args:
        data_dir: Where the files live (default: ``data_home()``).
        search_url: A SearXNG-style endpoint; when given (or ``AGENT_LAB_SEARCH_URL``
            is set) search goes over HTTP instead of the local index.
        corpus_dir: The folder local search indexes (default: ``AGENT_LAB_CORPUS``,
            else the bundled sample corpus).

    Raises:
        ConfigError: the search URL is not an http(s) URL, or no corpus folder is
            configured and the bundled one is not on the file system.
    """
    home = data_dir if data_dir is not None else data_home()
    database = home / TOOLS_DATABASE_NAME
    return BuiltinBackends(
        notes=SQLiteNoteBook(database),
        calendar=SQLiteCalendar(database),
        device=SQLiteDeviceState(database),
        search=_search_backend(home, search_url, corpus_dir),
    )


def _search_backend(home: Path, search_url: str | None, corpus_dir: Path | None) -> SearchBackend:
    url = search_url or os.environ.get(SEARCH_URL_ENV, "").strip()
    if url:
        return HttpSearchBackend(url)
    if corpus_dir is None:
        configured = os.environ.get(CORPUS_ENV, "").strip()
        corpus_dir = Path(configured).expanduser() if configured else None
    return LocalSearchBackend(home, corpus_dir=corpus_dir)
