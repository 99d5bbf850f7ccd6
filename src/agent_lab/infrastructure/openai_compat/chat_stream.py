"""The stream one ``stream_chat`` call returns: its items, its ``CallTiming`` and the
usage the provider reported."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Self, cast

from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.messages import StreamItem, TokenUsage


class ChatStream(AsyncIterator[StreamItem]):
    """The stream of one ``stream_chat`` call, with its ``CallTiming`` as ``timing``.

    ``items`` makes the items from the stream itself, so that they can fill in what the
    stream tells besides them (``timing``, ``usage``).
    """

    __slots__ = ("_items", "timing", "usage")

    def __init__(
        self, items: Callable[[ChatStream], AsyncIterator[StreamItem]], timing: CallTiming
    ) -> None:
        self.timing = timing
        """Where this call's time went; filled in as the call runs."""
        self.usage: TokenUsage | None = None
        """The provider's last usage report, once the stream has ended: also when it
        broke off after the report (the ``usage`` item comes only at the end of a stream
        that finished)."""
        self._items = cast(Any, items(self))

    def __aiter__(self) -> Self:
        return self

    def __anext__(self) -> Any:
        return self._items.__anext__()

    async def aclose(self) -> None:
        """Ends the call early and releases its connection."""
        await self._items.aclose()
