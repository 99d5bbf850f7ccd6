"""Audit details stored once: content-addressed values, shared message lists, caps.

A request audit carries the whole message list, so storing it verbatim makes a
session's file grow with the square of its length. Before an audit row is written:

* its ``messages`` (chat agent) or ``history`` (event agent) list becomes a reference to
  a chain of list nodes in ``audit_lists``: node ``i`` holds message ``i`` and points at
  the node of the list's first ``i - 1`` messages. A request that repeats the previous
  one's messages plus a few new ones adds a node per new message only;
* every message, and the values that repeat from request to request (``tools``, each
  schema of the list, and ``params``) when their JSON is at least ``SHARE_MIN_CHARS``
  long, are stored once per session in ``audit_blobs`` under their SHA-256 and
  referenced as ``{"$agent_lab_blob": "<sha256>"}``. Other values stay in the row.

``list_audit_logs`` puts everything back, so it returns the details exactly as they
were appended (references are only ever placed at those keys).

A string longer than ``CAP_CHARS`` anywhere in the details (a 50 MB tool result, say)
is not kept whole in the audit: it becomes a visible marker ``{"$agent_lab_capped":
{"original_chars": n, "sha256": "<of the UTF-8 text>", "head": "<first HEAD_CHARS
characters>"}}``. The transcript (``messages`` table) keeps such content in full.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from agent_lab.infrastructure.sqlite.records import dumps

BLOB_KEY: Final = "$agent_lab_blob"
LIST_KEY: Final = "$agent_lab_list"
CAP_KEY: Final = "$agent_lab_capped"
CHAINED_KEYS: Final = frozenset({"messages", "history"})
"""Message lists of request audits (chat agent, event agent), stored as list chains."""
SHARED_KEYS: Final = frozenset({"tools", "params"})
"""Values that repeat from request to request, stored once (each element of a list)."""
SHARE_MIN_CHARS: Final = 256
CAP_CHARS: Final = 1 << 20
HEAD_CHARS: Final = 2048
_CACHE_LIMIT: Final = 200_000
_ROOT: Final = ""
_RECENT_LISTS: Final = 4


@dataclass
class Packed:
    """What one write adds: blob bodies and list nodes, by hash."""

    blobs: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)
    """``hash -> (parent hash, item hash)``."""


@dataclass
class Chained:
    """A chained list as written: its items and the node hash at each position."""

    items: list[Any]
    nodes: list[str]


@dataclass
class BlobCache:
    """What one store knows is already committed for a session, to skip re-encoding.

    ``recent`` keeps the last chained lists as written, so the next request's list is
    compared with them item by item (``==``) and only its new tail is hashed; ``dumps``
    maps ``id(value) -> (value, hash)`` for message dicts seen before (the runtime hands
    the same history dicts to every request). Both rely on audited values not being
    changed afterwards.
    """

    blobs: set[str] = field(default_factory=set)
    nodes: dict[tuple[str, str], str] = field(default_factory=dict)
    dumps: dict[int, tuple[object, str]] = field(default_factory=dict)
    recent: dict[str, list[Chained]] = field(default_factory=dict)
    """The last few committed lists of each chained key, newest first."""
    pending: dict[str, list[Chained]] = field(default_factory=dict)
    """The lists of the write being packed (handed to ``commit`` once it is durable)."""

    def commit(self, packed: Packed, written: dict[str, list[Chained]]) -> None:
        """Remember what a committed write stored: its bodies, nodes and lists."""
        if len(self.nodes) > _CACHE_LIMIT or len(self.dumps) > _CACHE_LIMIT:
            self.blobs.clear()
            self.nodes.clear()
            self.dumps.clear()
            self.recent.clear()
        self.blobs.update(packed.blobs)
        self.nodes.update({link: node for node, link in packed.nodes.items()})
        for key, chains in written.items():
            self.recent[key] = [*reversed(chains), *self.recent.get(key, [])][:_RECENT_LISTS]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pack(details: dict[str, Any], what: str, out: Packed, cache: BlobCache) -> str:
    """The JSON text of ``details`` with repeated values referenced; fills ``out``.

    Raises:
        UsageError: a value cannot be stored as JSON.
    """
    packed: dict[str, Any] = {}
    for key, value in details.items():
        if key in CHAINED_KEYS and isinstance(value, list) and value:
            node = _chain(key, value, what, out, cache)
            packed[key] = {LIST_KEY: node, "length": len(value)}
        elif key in SHARED_KEYS and isinstance(value, list):
            packed[key] = [_share(item, what, out) for item in value]
        elif key in SHARED_KEYS:
            packed[key] = _share(value, what, out)
        else:
            packed[key] = value
    text = dumps(packed, what)
    return dumps(cap(packed), what) if len(text) > CAP_CHARS else text


def _chain(key: str, items: list[Any], what: str, out: Packed, cache: BlobCache) -> str:
    """The node of ``items``; the longest prefix equal to a recent list is reused as is.

    Requests alternate between a few list shapes (in ``dual_agent`` the event catalog
    comes and goes after the system prompts), so a few recent lists are compared.
    """
    shared, last = 0, Chained([], [])
    for candidate in [*reversed(cache.pending.get(key, [])), *cache.recent.get(key, [])]:
        length = _shared_prefix(items, candidate.items)
        if length > shared:
            shared, last = length, candidate
    node = last.nodes[shared - 1] if shared else _ROOT
    chained = Chained(list(items), last.nodes[:shared])
    for item in items[shared:]:
        item_hash = _item_hash(item, what, out, cache)
        link = (node, item_hash)
        known = cache.nodes.get(link)
        if known is None:
            known = _digest(f"{node}:{item_hash}")
            out.nodes[known] = link
        node = known
        chained.nodes.append(node)
    cache.pending.setdefault(key, []).append(chained)
    return node


def _shared_prefix(items: list[Any], seen: list[Any]) -> int:
    if items[: len(seen)] == seen:  # the usual case: the same list plus new messages
        return len(seen)
    shared = 0
    for item, old in zip(items, seen, strict=False):
        if item is not old and item != old:
            break
        shared += 1
    return shared


def _item_hash(item: Any, what: str, out: Packed, cache: BlobCache) -> str:
    seen = cache.dumps.get(id(item))
    if seen is not None and seen[0] is item and seen[1] in cache.blobs:
        return seen[1]
    body = _body(item, what)
    digest = _digest(body)
    if digest not in cache.blobs:
        out.blobs[digest] = body
    if isinstance(item, dict):
        cache.dumps[id(item)] = (item, digest)
    return digest


def _body(value: Any, what: str) -> str:
    body = dumps(value, what)
    if len(body) > CAP_CHARS:
        body = dumps(cap(value), what)
    return body


def _share(value: Any, what: str, out: Packed) -> Any:
    if not isinstance(value, dict | list | str):
        return value
    body = _body(value, what)
    if len(body) < SHARE_MIN_CHARS:
        return value
    digest = _digest(body)
    out.blobs[digest] = body
    return {BLOB_KEY: digest}


def cap(value: Any) -> Any:
    """``value`` with every string longer than ``CAP_CHARS`` replaced by a marker."""
    if isinstance(value, str):
        if len(value) <= CAP_CHARS:
            return value
        marker = {"original_chars": len(value), "sha256": _digest(value)}
        return {CAP_KEY: {**marker, "head": value[:HEAD_CHARS]}}
    if isinstance(value, dict):
        return {key: cap(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cap(item) for item in value]
    return value


# ---------------------------------------------------------------------- reading


def is_ref(value: Any, key: str) -> bool:
    """Whether ``value`` is a reference ``pack`` placed (a blob, or a list head)."""
    if not isinstance(value, dict) or key not in value:
        return False
    return value.keys() == ({key} if key == BLOB_KEY else {key, "length"})


def restored(
    details: dict[str, Any], chain: Callable[[str], list[str]], body: Callable[[str], Any]
) -> dict[str, Any]:
    """``details`` with its references put back: ``chain(node)`` gives a chained list's
    item hashes in order, ``body(hash)`` a stored value (each store looks them up its way).
    """

    def restore(value: Any) -> Any:
        return body(str(value[BLOB_KEY])) if is_ref(value, BLOB_KEY) else value

    result: dict[str, Any] = {}
    for key, value in details.items():
        if key in CHAINED_KEYS and is_ref(value, LIST_KEY):
            result[key] = [body(item) for item in chain(str(value[LIST_KEY]))]
        elif key in SHARED_KEYS and isinstance(value, list):
            result[key] = [restore(item) for item in value]
        elif key in SHARED_KEYS:
            result[key] = restore(value)
        else:
            result[key] = value
    return result


def _needs_store(details: dict[str, Any]) -> bool:
    return any(key in CHAINED_KEYS or key in SHARED_KEYS for key in details)


def unpack_all(conn: sqlite3.Connection, session_id: str, texts: list[str]) -> list[dict[str, Any]]:
    """Decode stored details and put their referenced values back."""
    decoded: list[dict[str, Any]] = [json.loads(text) for text in texts]
    if not any(_needs_store(details) for details in decoded):
        return decoded
    reader = _Reader(conn, session_id)
    return [reader.unpack(details) for details in decoded]


class _Reader:
    """Looks referenced rows up as they are needed, each once."""

    def __init__(self, conn: sqlite3.Connection, session_id: str) -> None:
        self.conn = conn
        self.session_id = session_id
        self.bodies: dict[str, str] = {}
        self.nodes: dict[str, tuple[str, str]] = {}

    def unpack(self, details: dict[str, Any]) -> dict[str, Any]:
        return restored(details, self.chain, self.body)

    def chain(self, node: str) -> list[str]:
        items: list[str] = []
        while node != _ROOT:
            parent, item = self.node(node)
            items.append(item)
            node = parent
        items.reverse()
        return items

    def node(self, digest: str) -> tuple[str, str]:
        found = self.nodes.get(digest)
        if found is None:
            parent, item = self._fetch("SELECT parent, item FROM audit_lists", digest)
            found = self.nodes[digest] = (str(parent), str(item))
        return found

    def body(self, digest: str) -> Any:
        text = self.bodies.get(digest)
        if text is None:
            text = self.bodies[digest] = str(self._fetch("SELECT body FROM audit_blobs", digest)[0])
        return json.loads(text)

    def _fetch(self, select: str, digest: str) -> tuple[Any, ...]:
        """The session's row of ``digest`` from ``select`` (a ``SELECT ... FROM table``)."""
        row: tuple[Any, ...] = self.conn.execute(
            f"{select} WHERE session_id = ? AND hash = ?", (self.session_id, digest)
        ).fetchone()
        return row
