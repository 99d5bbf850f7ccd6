"""Audit details stored once: content-addressed values and capped payloads.

A request audit carries the whole message list, so storing it verbatim makes a
session's file grow with the square of its length. Before an audit row is written,
each top-level value of its details, and each element of a top-level list (a message,
a tool schema), whose JSON is at least ``SHARE_MIN_CHARS`` long is stored once per
session in ``audit_blobs`` under its SHA-256 and replaced in the row by
``{"$agent_lab_blob": "<sha256>"}``. Reading puts the values back, so
``list_audit_logs`` returns the details exactly as they were appended.

A string longer than ``CAP_CHARS`` anywhere in the details (a 50 MB tool result, say)
is not kept whole: it is replaced by a visible marker
``{"$agent_lab_capped": {"original_chars": n, "sha256": "...", "head": "<first
HEAD_CHARS characters>"}}``. The transcript (``messages``) keeps such content in
full; only the audit copy is capped.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any, Final

from agent_lab.infrastructure.sqlite.records import dumps

BLOB_KEY: Final = "$agent_lab_blob"
CAP_KEY: Final = "$agent_lab_capped"
SHARE_MIN_CHARS: Final = 256
CAP_CHARS: Final = 1 << 20
HEAD_CHARS: Final = 2048
_IN_CHUNK: Final = 500

Blobs = dict[str, str]
"""Bodies to store, by hash."""


def pack(details: dict[str, Any], what: str, blobs: Blobs) -> str:
    """The JSON text of ``details`` with large values referenced; adds them to ``blobs``.

    Raises:
        UsageError: a value cannot be stored as JSON.
    """
    packed: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, list):
            packed[key] = [_share(item, what, blobs) for item in value]
        else:
            packed[key] = _share(value, what, blobs)
    return dumps(packed, what)


def _share(value: Any, what: str, blobs: Blobs) -> Any:
    if not isinstance(value, dict | list | str):
        return value
    body = dumps(value, what)
    if len(body) < SHARE_MIN_CHARS:
        return value
    if len(body) > CAP_CHARS:
        value = cap(value)
        body = dumps(value, what)
    digest = hashlib.sha256(body.encode()).hexdigest()
    blobs[digest] = body
    return {BLOB_KEY: digest}


def cap(value: Any) -> Any:
    """``value`` with every string longer than ``CAP_CHARS`` replaced by a marker."""
    if isinstance(value, str):
        if len(value) <= CAP_CHARS:
            return value
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        marker = {"original_chars": len(value), "sha256": digest, "head": value[:HEAD_CHARS]}
        return {CAP_KEY: marker}
    if isinstance(value, dict):
        return {key: cap(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cap(item) for item in value]
    return value


def store_blobs(conn: sqlite3.Connection, session_id: str, blobs: Blobs, known: set[str]) -> None:
    """Insert the bodies not already stored for the session (``known`` is a cache)."""
    fresh = [(session_id, digest, body) for digest, body in blobs.items() if digest not in known]
    if fresh:
        conn.executemany(
            "INSERT OR IGNORE INTO audit_blobs (session_id, hash, body) VALUES (?, ?, ?)", fresh
        )


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and BLOB_KEY in value


def _refs(details: dict[str, Any]) -> Iterable[str]:
    for value in details.values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if _is_ref(item):
                yield str(item[BLOB_KEY])


def unpack_all(
    conn: sqlite3.Connection, session_id: str, texts: list[str]
) -> list[dict[str, Any]]:
    """Decode stored details and put their referenced values back."""
    decoded: list[dict[str, Any]] = [json.loads(text) for text in texts]
    wanted = sorted({digest for details in decoded for digest in _refs(details)})
    bodies = _load(conn, session_id, wanted)
    return [_unpack(details, bodies) for details in decoded]


def _load(conn: sqlite3.Connection, session_id: str, digests: list[str]) -> Blobs:
    bodies: Blobs = {}
    for start in range(0, len(digests), _IN_CHUNK):
        chunk = digests[start : start + _IN_CHUNK]
        marks = ", ".join("?" for _ in chunk)
        rows = conn.execute(
            f"SELECT hash, body FROM audit_blobs WHERE session_id = ? AND hash IN ({marks})",
            (session_id, *chunk),
        )
        bodies.update((str(digest), str(body)) for digest, body in rows)
    return bodies


def _unpack(details: dict[str, Any], bodies: Blobs) -> dict[str, Any]:
    def restore(value: Any) -> Any:
        if _is_ref(value):
            body = bodies.get(str(value[BLOB_KEY]))
            return {"$agent_lab_missing_blob": value[BLOB_KEY]} if body is None else json.loads(body)
        return value

    return {
        key: [restore(item) for item in value] if isinstance(value, list) else restore(value)
        for key, value in details.items()
    }
