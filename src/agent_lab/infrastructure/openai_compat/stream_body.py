"""The body of a 2xx streaming answer, refused when it is not an event stream.

OpenAI, vLLM, llama.cpp and Ollama answer with ``text/event-stream`` (some add
``; charset=utf-8``); that body is read as it comes. A JSON document is refused at once
with the provider's message. Any other type, or none, is not refused on its name alone:
some servers send proper SSE framing as ``text/plain`` or ``application/x-ndjson``. Such
a body is judged by its first bytes instead: an event stream begins with a field
(``data``, ``event``, ``id``, ``retry``), a ``:`` comment or a blank line. Anything else
(an HTML page, a plain-text notice, bare JSON lines) is a ``ProviderProtocolError``
naming the content type, with the start of the body, secrets masked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai

from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.infrastructure.openai_compat.provider_errors import provider_message
from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask

__all__ = ["event_stream_chunks"]

_EVENT_STREAM = "text/event-stream"
_JSON = "application/json"
_SSE_STARTS = (b"data", b"event", b"id", b"retry", b":")
_PREVIEW = 200
"""Bytes of the body quoted in the error."""


async def event_stream_chunks(
    response: openai.AsyncAPIResponse[Any], mask: SecretMask
) -> AsyncIterator[bytes]:
    """The raw body reads of a 2xx answer, checked to be an event stream.

    Raises:
        ProviderProtocolError: The answer is a JSON document (raised here), or its body
            does not begin like an event stream (raised by the first read).
    """
    content_type = response.headers.get("content-type", "")
    kind = content_type.partition(";")[0].strip().lower()
    if kind == _JSON:
        await response.read()
        message = mask.text(provider_message(response.http_response, mask))
        raise ProviderProtocolError(f"expected an event stream, got a JSON answer: {message}")
    chunks = response.iter_bytes().__aiter__()
    if kind == _EVENT_STREAM:
        return chunks
    return _CheckedBody(chunks, content_type, mask)


class _CheckedBody:
    """Holds back the first bytes until they show whether the body is an event stream."""

    __slots__ = ("_chunks", "_content_type", "_mask", "_open")

    def __init__(self, chunks: AsyncIterator[bytes], content_type: str, mask: SecretMask) -> None:
        self._chunks = chunks
        self._content_type = content_type
        self._mask = mask
        self._open = False
        """Set once the start of the body looked like an event stream."""

    def __aiter__(self) -> _CheckedBody:
        return self

    async def __anext__(self) -> bytes:
        if self._open:
            return await self._chunks.__anext__()
        held = b""
        async for data in self._chunks:
            held += data
            verdict = _begins_like_sse(held)
            if verdict is False:
                raise await self._refusal(held)
            if verdict:
                self._open = True
                return held
        self._open = True
        if held:  # too short to tell: the parser reports an unfinished answer
            return held
        raise StopAsyncIteration

    async def _refusal(self, held: bytes) -> ProviderProtocolError:
        while len(held) < _PREVIEW:
            try:
                held += await self._chunks.__anext__()
            except StopAsyncIteration:
                break
        excerpt = self._mask.data(held)[:_PREVIEW].decode("utf-8", "replace").strip()
        shown = self._mask.text(self._content_type) or "none"
        cut = "…" if len(held) > _PREVIEW else ""
        return ProviderProtocolError(
            f"the endpoint did not answer with an event stream "
            f"(content type {shown}): {excerpt}{cut}"
        )


def _begins_like_sse(head: bytes) -> bool | None:
    """Whether ``head`` starts like an event stream; ``None`` while too short to tell."""
    text = head.lstrip(b" \t\r\n")
    if not text:
        return None
    for start in _SSE_STARTS:
        if text.startswith(start):
            return True
        if len(text) < len(start) and start.startswith(text):
            return None
    return False
