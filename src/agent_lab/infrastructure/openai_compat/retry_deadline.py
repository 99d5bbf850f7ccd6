"""The SDK client, kept from retrying into a deadline its call cannot meet.

The SDK retries a 408/409/429/5xx answer after the delay the provider asks for (up to
two minutes) or, when it names none, after its own backoff. When that wait, or the
retry it leads to, runs past the call's deadline, the call can only end in the client's
own timeout, and the user would read "it sent no content" about a provider that
answered at once with an error. So ``DeadlineAwareOpenAI``:

* does not retry an answer whose ``Retry-After`` passes the deadline: the SDK raises it
  as it is (``ProviderHTTPError`` with the provider's message, e.g. HTTP 429 "Rate
  limit reached");
* does not sleep a backoff that would end past the deadline: it raises the answer
  that asked for the retry (e.g. HTTP 503 with its message);
* keeps the last error answer it retried, so that a deadline passing during a retry's
  attempt is reported as that answer (``RetriedAnswers.error``), not as a timeout.

A wait that fits is waited out as before. Error answers are read when they arrive
(they are small) so their message outlives the retry.

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
from dataclasses import dataclass
from typing import Any

import httpx
import openai

__all__ = ["DeadlineAwareOpenAI", "RetriedAnswers", "retry_deadline"]


@dataclass(slots=True)
class RetriedAnswers:
    """What the retries of one request being opened met."""

    deadline: float
    """The event loop time by which the request must have an answer."""
    error: openai.APIStatusError | None = None
    """The last error answer the SDK retried (its body read), if any."""


_OPENING: ContextVar[RetriedAnswers | None] = ContextVar("agent_lab_retry_deadline", default=None)


@contextlib.contextmanager
def retry_deadline(answers: RetriedAnswers) -> Iterator[None]:
    """Makes ``answers.deadline`` the limit of retry waits inside the block, and
    ``answers`` where the retries tell what they met."""
    token = _OPENING.set(answers)
    try:
        yield
    finally:
        _OPENING.reset(token)


class DeadlineAwareOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` whose retries never wait past the call's deadline."""

    async def _send_request(
        self, request: httpx.Request, *, stream: bool, **kwargs: Any
    ) -> httpx.Response:
        response = await super()._send_request(request, stream=stream, **kwargs)
        answers = _OPENING.get()
        if answers is not None and response.status_code >= 400:
            await response.aread()  # an error answer: its message must outlive a retry
        elif answers is not None:
            answers.error = None  # answered: a deadline passing now is the stream's
        return response

    def _should_retry(self, response: httpx.Response) -> bool:
        if not super()._should_retry(response):
            return False
        answers = _OPENING.get()
        if answers is None:
            return True
        wait = self._parse_retry_after_header(response.headers)
        asked = wait is not None and math.isfinite(wait) and wait > 0
        if asked and asyncio.get_running_loop().time() + (wait or 0.0) >= answers.deadline:
            return False  # raised as it is, with its message
        if response.is_stream_consumed:
            answers.error = self._make_status_error_from_response(response)
        return True

    async def _sleep_for_retry(
        self,
        *,
        retries_taken: int,
        max_retries: int,
        options: Any,
        response: httpx.Response | None,
    ) -> None:
        answers = _OPENING.get()
        if answers is None or response is None:
            await super()._sleep_for_retry(
                retries_taken=retries_taken,
                max_retries=max_retries,
                options=options,
                response=response,
            )
            return
        wait = self._calculate_retry_timeout(max_retries - retries_taken, options, response.headers)
        if asyncio.get_running_loop().time() + wait >= answers.deadline and answers.error:
            raise answers.error  # the backoff would outlast the deadline
        await asyncio.sleep(wait)
