"""How the recorder reaches its store: grouped transactions, and writes on the loop.

Both are optional capabilities of a store's class: ``atomic_writes()`` (commit several
calls as one transaction) and ``write_now`` (make a short write on the calling thread
when it needs no waiting, else ``NotNow``). Only a method of the store's class counts:
a wrapper that forwards calls one by one (``__getattr__``) keeps one transaction per
call, in a worker thread, as its calls expect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Final

from agent_lab.application.session_store import SessionStore, WritesNow
from agent_lab.domain.errors import (
    PersistenceFailed,
    SessionNotFound,
    StoreError,
    StoreFormatError,
    UsageError,
)
from agent_lab.domain.json_values import JsonTextList
from agent_lab.domain.messages import ChatMessage

NOW_CHARS: Final = 64 * 1024
"""A write whose messages, with those of the write before it (whose audits it carries),
hold more characters than this goes to the worker thread even when the store could
make it now: encoding and inserting it would hold up the loop."""
NOW_RAW_BYTES: Final = 256 * 1024
"""The same for the provider chunks its buffered audits carry: they are spliced in as
they came (cheap), but past 1 MiB an audit's text is capped, which decodes them."""


def grouping(store: SessionStore) -> Callable[[], AbstractContextManager[Any]]:
    """The store's ``atomic_writes`` block, or a no-op one when it has none.

    Only a method of the store's class counts: a wrapper that forwards calls one by
    one (``__getattr__``) keeps one transaction per call, as its calls expect.
    """
    atomic = getattr(type(store), "atomic_writes", None)
    if atomic is None:
        return contextlib.nullcontext
    return lambda: atomic(store)


def writing_now(store: SessionStore) -> WritesNow | None:
    """The store, when its class offers ``write_now`` (as with ``grouping``)."""
    if getattr(type(store), "write_now", None) is None:
        return None
    now: WritesNow = store  # type: ignore[assignment]
    return now


class Resumed(Exception):  # noqa: N818 (declines a write now, never escapes)
    """A session with history is read back in the worker thread, not on the loop."""


def chars_of(messages: list[ChatMessage]) -> int:
    return sum(len(message.content) for message in messages)


def raw_bytes(details: dict[str, Any]) -> int:
    """Bytes of provider chunks an audit carries (``raw_chunks`` of a chat response,
    ``raw_model_chunks`` of an event-agent response); only those keys are looked at."""
    total = _texts_size(details.get("raw_chunks"))
    calls = details.get("raw_model_chunks")
    if isinstance(calls, list):
        total += sum(_texts_size(c.get("chunks")) for c in calls if isinstance(c, dict))
    return total


def _texts_size(value: object) -> int:
    return sum(map(len, value.texts)) if isinstance(value, JsonTextList) else 0


def write_failure(store: SessionStore, session_id: str, exc: Exception) -> Exception:
    """What a failed write of the session raises: a ``StoreError`` as it is, but an
    unknown session or batch of a session that no longer exists (deleted by something
    that writes without a claim) is ``deleted``; a store file gone bad mid-session is
    ``corrupt``; anything else (an adapter bug) still reads as a storage failure."""
    if isinstance(exc, SessionNotFound | UsageError) and _gone(store, session_id):
        return deleted_under_claim(session_id)
    if isinstance(exc, StoreFormatError):
        return PersistenceFailed("corrupt", str(exc))
    if isinstance(exc, StoreError):
        return exc
    return PersistenceFailed("unknown", str(exc))


def deleted_under_claim(session_id: str) -> PersistenceFailed:
    """The failure of a session's writes once the session was deleted under its claim."""
    return PersistenceFailed(
        "deleted", f"session {session_id!r} no longer exists; nothing was written"
    )


def _gone(store: SessionStore, session_id: str) -> bool:
    try:
        return store.get_session(session_id) is None
    except Exception:  # noqa: BLE001 (a store that cannot answer did not lose it)
        return False
