"""What a store gives the shared role code: its transactions, parameter style and rows.

``StoreHooks`` declares what the shared roles (``ledger.Ledger``,
``transcript.SharedTranscript``) call; the SQLite and PostgreSQL stores implement it on
their own connections (hence ``Any`` for a connection). ``StoreRows`` is the shape of a
store's ``rows`` module, which each store hands over as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from agent_lab.infrastructure.sqlite.blobs import BlobCache
from agent_lab.infrastructure.sqlite.rows import MessageFields


class StoreRows(Protocol):
    """A store's row functions (``sqlite.rows``, ``postgres.rows``)."""

    def require_session(self, conn: Any, session_id: str) -> None: ...

    def session_exists(self, conn: Any, session_id: str) -> bool: ...

    def insert_session(self, conn: Any, session_id: str, title: str, config: str) -> None: ...

    def select_session(self, conn: Any, session_id: str) -> dict[str, Any] | None: ...

    def turn_exists(self, conn: Any, session_id: str, turn_index: int) -> bool: ...

    def select_turns(self, conn: Any, session_id: str) -> list[dict[str, Any]]: ...

    def select_metrics(self, conn: Any, session_id: str) -> list[dict[str, Any]]: ...

    def touch(self, conn: Any, session_id: str, now: str) -> None: ...

    def insert_messages(
        self, conn: Any, session_id: str, turn_index: int, rows: list[MessageFields]
    ) -> list[int]: ...


class StoreHooks:
    """Declared here, provided by each store's core and role classes."""

    _tokens: dict[str, Any]
    """The claim this store holds, by session (a token, or a token and its epoch)."""
    _known_blobs: dict[str, BlobCache]
    """What this store knows is committed of each session's audit values."""

    def _after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the write in progress is durable."""
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def fence(self, conn: Any, session_id: str) -> object:
        raise NotImplementedError

    def writable(self, conn: Any, session_id: str) -> None:
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        """``statement`` (written with ``?`` parameters) in the store's parameter style."""
        raise NotImplementedError

    def _rows(self) -> StoreRows:
        raise NotImplementedError

    def _executemany(self, conn: Any, statement: str, batch: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError
