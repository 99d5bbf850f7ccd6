"""The SDK client, kept from waiting out a ``Retry-After`` its call's deadline cannot.

The SDK retries a 408/409/429/5xx answer after the delay the provider asks for (up to
two minutes). When that delay runs past the call's deadline, the wait can only end in
the client's own timeout, and the user would read "it sent no content" about a
provider that answered at once. ``DeadlineAwareOpenAI`` does not retry such an answer:
the SDK raises it as it is (``ProviderHTTPError`` with the provider's message, e.g.
HTTP 429 "Rate limit reached"). A delay that fits is waited out as before.

The deadline is the one in force while the request is being opened, handed over in a
context variable by ``retry_deadline(...)`` (the SDK sends the request in the caller's
task, so the variable is visible to it and to nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar

import httpx
import openai

__all__ = ["DeadlineAwareOpenAI", "retry_deadline"]

_DEADLINE: ContextVar[float | None] = ContextVar("agent_lab_retry_deadline", default=None)
"""The event loop time by which the request being opened must have an answer."""


@contextlib.contextmanager
def retry_deadline(deadline: float) -> Iterator[None]:
    """Makes ``deadline`` (event loop time) the limit of retry waits inside the block."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class DeadlineAwareOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` that gives up a retry whose ``Retry-After`` passes the deadline."""

    def _should_retry(self, response: httpx.Response) -> bool:
        if not super()._should_retry(response):
            return False
        deadline = _DEADLINE.get()
        if deadline is None:
            return True
        wait = self._parse_retry_after_header(response.headers)
        if wait is None or not math.isfinite(wait) or wait <= 0:
            return True  # the SDK's own backoff: short, and within the deadline's watch
        return asyncio.get_running_loop().time() + wait < deadline
