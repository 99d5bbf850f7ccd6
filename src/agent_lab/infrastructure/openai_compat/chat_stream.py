"""The stream one ``stream_chat`` call returns: its items, its ``CallTiming``, the
usage the provider reported and why it ended the answer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Self, cast

import httpx
import openai

from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.messages import StreamItem, TokenUsage
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream


class ChatStream(AsyncIterator[StreamItem]):
    """The stream of one ``stream_chat`` call, with its ``CallTiming`` as ``timing``.

    ``items`` makes the items from the stream itself, so that they can fill in what the
    stream tells besides them (``timing``, ``usage``).
    """

    __slots__ = ("_items", "finish_reason", "timing", "usage")

    def __init__(
        self, items: Callable[[ChatStream], AsyncIterator[StreamItem]], timing: CallTiming
    ) -> None:
        self.timing = timing
        """Where this call's time went; filled in as the call runs."""
        self.usage: TokenUsage | None = None
        """The provider's last usage report, once the stream has ended: also when it
        broke off after the report (the ``usage`` item comes only at the end of a stream
        that finished)."""
        self.finish_reason: str | None = None
        """Why the provider ended the answer (``stop``, ``tool_calls``, ``length`` when
        ``max_tokens`` cut it off, ``content_filter``…), once the stream has ended;
        ``None`` when it sent none."""
        self._items = cast(Any, items(self))

    def __aiter__(self) -> Self:
        return self

    def __anext__(self) -> Any:
        return self._items.__anext__()

    async def aclose(self) -> None:
        """Ends the call early and releases its connection."""
        await self._items.aclose()


@contextlib.contextmanager
def report_at_end(
    out: ChatStream, chunks: ChunkStream, loop: asyncio.AbstractEventLoop, sent: float
) -> Iterator[None]:
    """Sets the stream's ``timing.total_ms`` and ``usage`` when it ends, and also when it
    fails or is closed early: a call that broke off tells how long it ran and the usage
    the provider reported before it broke. A call refused after retries tells its
    attempts: the SDK numbers each retry in the request it sends."""
    try:
        yield
    except openai.APIError as exc:
        if out.timing.connect_ms is None:  # no answer came: the SDK's last attempt failed
            out.timing.attempts = 1 + _retries_of(exc.request)
        raise
    finally:
        out.timing.total_ms = round((loop.time() - sent) * 1000, 3)
        out.usage = chunks.reported_usage()
        out.finish_reason = chunks.finish_reason


def _retries_of(request: httpx.Request) -> int:
    """The retries the SDK had taken when it sent ``request`` (its retry-count header)."""
    count = request.headers.get("x-stainless-retry-count", "0")
    return int(count) if count.isdigit() else 0
