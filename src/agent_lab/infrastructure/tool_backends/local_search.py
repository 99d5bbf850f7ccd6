"""Offline full-text search: SQLite FTS5 ranked by bm25 over a folder of documents.

The index is a derived cache in the data directory (one file per corpus folder). Each
search first compares the folder's files (size and modification time) with the index
and re-indexes only what changed, so edits, new files and deletions show up at once.
Only files whose real path (symlinks followed) lies inside the folder are indexed: a
link pointing out of the corpus is skipped.
User text never reaches FTS5 as syntax: it is split into words, each word is quoted,
and the words are joined with ``OR``.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from importlib.resources import files
from pathlib import Path

from agent_lab.application.builtin_backends import BuiltinToolError, SearchBackendName, SearchHit
from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.tool_backends.sqlite_file import ToolDatabase

DOCUMENT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
"""Files of the corpus folder that are indexed (searched recursively)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    title TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS passages USING fts5(
    title, body, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""

_SEARCH_SQL = """
SELECT documents.path, documents.title,
       snippet(passages, 1, '', '', '…', 24) AS excerpt,
       bm25(passages, 4.0, 1.0) AS rank
FROM passages JOIN documents ON documents.id = passages.rowid
WHERE passages MATCH ?
ORDER BY rank
LIMIT ?
"""

_MAX_QUERY_WORDS = 32
_WORD = re.compile(r"[^\W_]+")
_STOP_WORD_TEXT = (
    "a an and are as at be but by can do does for from how i in is it me my of on or "
    "not please should so that the this to was what when where which who why will with you"
)
_STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())

Signature = tuple[int, int]
"""A file's ``(mtime_ns, size)``: when it changes, the file is indexed again."""


def bundled_corpus_dir() -> Path:
    """The sample corpus shipped in ``agent_lab/resources/corpus``.

    Raises:
        ConfigError: the package is not installed as plain files (e.g. zipped); point
            ``AGENT_LAB_CORPUS`` at a folder instead.
    """
    resource = files("agent_lab.resources").joinpath("corpus")
    if not isinstance(resource, Path) or not resource.is_dir():
        raise ConfigError("the bundled corpus is not a folder; set AGENT_LAB_CORPUS to one")
    return resource


def match_expression(query: str) -> str | None:
    """An FTS5 query that matches any informative word of ``query``; ``None`` if none.

    For example, ``'what is "WAL" (AND) mode?'`` becomes ``'"wal" OR "and" OR "mode"'``.
    """
    words = [word.lower() for word in _WORD.findall(query)]
    informative = [word for word in words if word not in _STOP_WORDS] or words
    unique = list(dict.fromkeys(informative))[:_MAX_QUERY_WORDS]
    if not unique:
        return None
    return " OR ".join(f'"{word}"' for word in unique)


class LocalSearchBackend:
    """Searches a folder of Markdown and text files with SQLite FTS5 (bm25 ranking).

    Thread-safe: every call uses its own SQLite connection.
    """

    def __init__(self, data_dir: Path, corpus_dir: Path | None = None) -> None:
        """Index ``corpus_dir`` (default: the bundled corpus) under ``data_dir/search``.

        Raises:
            ConfigError: no folder was given and the bundled corpus is not a folder.
        """
        self.corpus_dir = corpus_dir if corpus_dir is not None else bundled_corpus_dir()
        digest = hashlib.sha256(str(self.corpus_dir.resolve()).encode()).hexdigest()[:16]
        self.index_path = data_dir / "search" / f"index-{digest}.sqlite3"
        self._db = ToolDatabase(self.index_path, _SCHEMA)

    @property
    def name(self) -> SearchBackendName:
        """Always ``"local"``."""
        return "local"

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """The best ``limit`` documents for ``query``, after refreshing the index.

        Raises:
            BuiltinToolError: the corpus folder is missing or the index failed.
        """
        self.refresh()
        expression = match_expression(query)
        if expression is None:
            return []
        with self._db.reader() as connection:
            rows = connection.execute(_SEARCH_SQL, (expression, limit)).fetchall()
        return [
            SearchHit(title=title, snippet=excerpt, source=path, score=_score(rank))
            for path, title, excerpt, rank in rows
        ]

    def refresh(self) -> int:
        """Bring the index up to date with the folder; returns how many files changed.

        Raises:
            BuiltinToolError: the corpus folder is missing or the index failed.
        """
        on_disk = _scan(self.corpus_dir)
        with self._db.reader() as connection:
            if not _changes(on_disk, _indexed(connection)):
                return 0
        with self._db.transaction() as connection:
            indexed = _indexed(connection)  # again, now under the write lock
            changes = _changes(on_disk, indexed)
            for relative in changes:
                _reindex(connection, self.corpus_dir, relative, on_disk.get(relative), indexed)
        return len(changes)


def _scan(corpus: Path) -> dict[str, Signature]:
    if not corpus.is_dir():
        raise BuiltinToolError(f"search corpus folder {corpus} does not exist")
    root = corpus.resolve()
    found: dict[str, Signature] = {}
    for path in sorted(corpus.rglob("*")):
        relative = path.relative_to(corpus)
        if path.suffix.lower() not in DOCUMENT_SUFFIXES or _hidden(relative):
            continue
        if not _inside(path, root):
            continue  # a symlink out of the folder: never indexed
        try:
            stat = path.stat()
        except OSError:
            continue  # vanished while scanning
        if path.is_file():
            found[relative.as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return found


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``'s real location (symlinks followed) is within ``root``."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # vanished, or a symlink loop
        return False


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _indexed(connection: sqlite3.Connection) -> dict[str, tuple[int, Signature]]:
    rows = connection.execute("SELECT path, id, mtime_ns, size FROM documents").fetchall()
    return {path: (doc_id, (mtime_ns, size)) for path, doc_id, mtime_ns, size in rows}


def _changes(on_disk: dict[str, Signature], indexed: dict[str, tuple[int, Signature]]) -> set[str]:
    removed = indexed.keys() - on_disk.keys()
    changed = {
        path for path, signature in on_disk.items() if indexed.get(path, (0, None))[1] != signature
    }
    return removed | changed


def _reindex(
    connection: sqlite3.Connection,
    corpus: Path,
    relative: str,
    signature: Signature | None,
    indexed: dict[str, tuple[int, Signature]],
) -> None:
    if relative in indexed:
        doc_id = indexed[relative][0]
        connection.execute("DELETE FROM passages WHERE rowid = ?", (doc_id,))
        connection.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
    path = corpus / relative
    inside = _inside(path, corpus.resolve())  # again: a link may have changed since the scan
    text = _read(path) if signature is not None and inside else None
    if text is None or signature is None:
        return
    title, body = document_text(text, fallback_title=Path(relative).stem)
    cursor = connection.execute(
        "INSERT INTO documents (path, mtime_ns, size, title) VALUES (?, ?, ?, ?)",
        (relative, signature[0], signature[1], title),
    )
    connection.execute(
        "INSERT INTO passages (rowid, title, body) VALUES (?, ?, ?)",
        (cursor.lastrowid, title, body),
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[*_`>#|]+")


def document_text(markdown: str, *, fallback_title: str) -> tuple[str, str]:
    """``(title, body)`` of a document: the first heading (else a title made from
    ``fallback_title``) and the rest as plain text on one line."""
    lines = markdown.splitlines()
    title = ""
    for index, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading:
            title = heading[1].strip()
            del lines[index]
            break
    if not title:
        title = re.sub(r"[-_]+", " ", fallback_title).strip().capitalize() or "Untitled"
    body = _MARKUP.sub(" ", _LINK.sub(r"\1", "\n".join(lines)))
    return title, " ".join(body.split())


def _score(rank: float) -> float:
    return float(f"{-rank:.4g}")
