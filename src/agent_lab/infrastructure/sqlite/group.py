"""An ``atomic_writes()`` block of the SQLite store (see ``connection``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(slots=True)
class Group:
    """An ``atomic_writes()`` block: the thread that opened it, and what to remember
    once it commits."""

    thread: int
    after_commit: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    writable: set[str] = dataclasses.field(default_factory=set)
    """Sessions ``writable()`` already checked in this transaction."""
    created: set[str] = dataclasses.field(default_factory=set)
    """Sessions this transaction inserted: nothing else of theirs can exist yet."""
    failed: bool = False
    """A write inside failed: the block rolls back whatever the caller does."""
