"""Small task helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


async def finish_even_if_cancelled(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to completion even when the caller is cancelled meanwhile.

    Cleanup that must not be cut short (closing a batch in the journal, releasing a
    session claim) goes through here; a cancellation is re-raised once it is done.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


class _Writer(Protocol):
    @property
    def persistent(self) -> bool: ...


async def durably(recorder: _Writer, write: Coroutine[Any, Any, None]) -> None:
    """``finish_even_if_cancelled`` for a recorder's write; a recorder without a store
    never suspends, so its writes need no shielding task."""
    if recorder.persistent:
        await finish_even_if_cancelled(write)
    else:
        await write
