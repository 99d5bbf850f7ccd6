"""The stream one ``stream_chat`` call returns: its items, and its ``CallTiming``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Self, cast

from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.messages import StreamItem


class ChatStream(AsyncIterator[StreamItem]):
    """The stream of one ``stream_chat`` call, with its ``CallTiming`` as ``timing``."""

    __slots__ = ("_items", "timing")

    def __init__(self, items: AsyncIterator[StreamItem], timing: CallTiming) -> None:
        self._items = cast(Any, items)
        self.timing = timing
        """Where this call's time went; filled in as the call runs."""

    def __aiter__(self) -> Self:
        return self

    def __anext__(self) -> Any:
        return self._items.__anext__()

    async def aclose(self) -> None:
        """Ends the call early and releases its connection."""
        await self._items.aclose()
