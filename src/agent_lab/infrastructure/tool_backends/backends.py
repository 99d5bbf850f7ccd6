"""The real backends of the built-in tools, and where they keep their files.

``shared_local_backends()`` is the default that the composition root
``agent_lab.defaults`` registers with ``agent_lab.application.builtin_backends``:

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

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from agent_lab.application.builtin_backends import BuiltinBackends, SearchBackend
from agent_lab.infrastructure.tool_backends.local_search import (
    LocalSearchBackend,
    bundled_corpus_dir,
)
from agent_lab.infrastructure.tool_backends.stores import (
    SQLiteCalendar,
    SQLiteDeviceState,
    SQLiteNoteBook,
)

if TYPE_CHECKING:
    from agent_lab.infrastructure.tool_backends.http_search import HttpSearchBackend

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
    "resolve_home",
    "shared_local_backends",
]

HOME_ENV = "AGENT_LAB_HOME"
CORPUS_ENV = "AGENT_LAB_CORPUS"
SEARCH_URL_ENV = "AGENT_LAB_SEARCH_URL"
TOOLS_DATABASE_NAME = "builtin-tools.sqlite3"


def data_home() -> Path:
    """The lab's data directory, created if missing.

    ``AGENT_LAB_HOME`` when set, else ``platformdirs.user_data_dir("agent-lab")``.
    """
    home = resolve_home()
    home.mkdir(parents=True, exist_ok=True)
    return home


def resolve_home(home: Path | None = None) -> Path:
    """``home``, else ``AGENT_LAB_HOME`` when set, else the platform's user data directory.

    Nothing is created; the backends create their files on first use.
    """
    if home is not None:
        return home
    configured = os.environ.get(HOME_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path(_platform_data_dir())


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


def shared_local_backends(home: Path | None = None) -> BuiltinBackends:
    """``local_backends`` for ``home`` and the current environment, shared per process.

    The backends hold no per-session state (every call opens its own connection), so
    one instance per configuration serves every registry; the built-in definitions
    bound to it are then shared too.
    """
    environ = os.environ
    search_url = environ.get(SEARCH_URL_ENV, "").strip()
    corpus = environ.get(CORPUS_ENV, "").strip()
    # Resolving the home (platformdirs, paths) costs more than the rest of a runtime's
    # construction: it is redone only when a variable it depends on changes.
    where = (home, *(environ.get(name) for name in _HOME_INPUTS))
    return _shared_at(where, search_url, corpus)


_HOME_INPUTS = (HOME_ENV, "HOME") + (
    ("XDG_DATA_HOME",)
    if sys.platform.startswith("linux")
    else ("APPDATA", "LOCALAPPDATA", "USERPROFILE")
    if sys.platform == "win32"
    else ()
)
"""What ``resolve_home`` (and the platform's data directory) depends on."""


@functools.lru_cache(maxsize=64)
def _shared_at(
    where: tuple[Path | str | None, ...], search_url: str, corpus: str
) -> BuiltinBackends:
    home = where[0]
    return _shared(resolve_home(home if isinstance(home, Path) else None), search_url, corpus)


@functools.lru_cache(maxsize=64)
def _shared(home: Path, search_url: str, corpus: str) -> BuiltinBackends:
    corpus_dir = Path(corpus).expanduser() if corpus else None
    return local_backends(home, search_url=search_url or None, corpus_dir=corpus_dir)


def _search_backend(home: Path, search_url: str | None, corpus_dir: Path | None) -> SearchBackend:
    url = search_url or os.environ.get(SEARCH_URL_ENV, "").strip()
    if url:
        from agent_lab.infrastructure.tool_backends.http_search import HttpSearchBackend

        return HttpSearchBackend(url)
    if corpus_dir is None:
        configured = os.environ.get(CORPUS_ENV, "").strip()
        corpus_dir = Path(configured).expanduser() if configured else None
    return LocalSearchBackend(home, corpus_dir=corpus_dir)


def __getattr__(name: str) -> Any:
    # ``httpx`` is imported only when HTTP search is used: it costs more than
    # everything else a runtime's first construction does.
    if name == "HttpSearchBackend":
        from agent_lab.infrastructure.tool_backends.http_search import HttpSearchBackend

        return HttpSearchBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
