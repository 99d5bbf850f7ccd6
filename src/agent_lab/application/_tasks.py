"""Small task helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

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


def being_cancelled() -> bool:
    """The current task has a cancellation pending or under way."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
