"""The streaming chat client for OpenAI-compatible endpoints (OpenAI, vLLM, Ollama, ...).

The official ``openai`` SDK sends the request (authentication, retries with backoff on
408/409/429/5xx and connection errors honouring ``Retry-After``, timeouts); the client
reads the raw event stream itself, so no typed chunk objects are built. See
``_chunk_parser`` for the per-chunk work and ``_provider_errors`` for error mapping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self, cast
from uuid import uuid4

import httpx
import openai

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import ConfigError, ProviderProtocolError, UsageError
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream
from agent_lab.infrastructure.openai_compat.provider_errors import (
    map_provider_errors,
    provider_message,
    scrub,
)
from agent_lab.infrastructure.openai_compat.request_body import ChatRequest, build_chat_request
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript

__all__ = ["OpenAICompatibleChatClient", "map_provider_errors"]

_SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "proxy-authorization"})
_UNUSED_KEY = "no-key"
"""Placeholder the SDK insists on; its ``Authorization`` header is omitted on every request."""

_StreamingResponse = openai.AsyncAPIResponse[openai.AsyncStream[Any]]


class OpenAICompatibleChatClient:
    """Streams chat completions from an OpenAI-compatible ``/chat/completions`` endpoint.

    Implements the ``ChatClient`` port. Use it as an async context manager, or call
    ``aclose()`` when done.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        """Configures the client; no connection is made until the first request.

        Args:
            base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
            api_key: Sent as ``Authorization: Bearer``; ``None`` sends no credentials (the
                ``OPENAI_API_KEY`` environment variable is deliberately not read).
            timeout: Seconds to wait for the connection and for each read of the stream.
            max_retries: Retries after 408/409/429/5xx answers and connection failures.
            default_headers: Extra headers sent with every request.
            http_client: A client to send requests with; the caller keeps ownership.

        Raises:
            ConfigError: ``base_url`` is not an http(s) URL.
        """
        headers = dict(default_headers or {})
        _check_base_url(base_url)
        self._base_url = base_url
        self._endpoint = base_url.rstrip("/") + "/chat/completions"
        self._timeout = timeout
        self._secrets = _secrets(api_key, headers)
        self._secret_bytes = tuple(secret.encode() for secret in self._secrets)
        sends_auth = bool(api_key) or any(k.lower() == "authorization" for k in headers)
        self._request_headers: dict[str, str | openai.Omit] = (
            {} if sends_auth else {"Authorization": openai.Omit()}
        )
        self._owns_http_client = http_client is None
        self._closed = False
        self._sdk = openai.AsyncOpenAI(
            api_key=api_key or _UNUSED_KEY,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=headers or None,
            http_client=http_client,
        )

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connection pool (not an ``http_client`` passed in). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owns_http_client:
                await self._sdk.close()

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        """Streams one chat completion.

        Args:
            messages: The transcript; checked against the tool protocol before sending.
            tools: OpenAI function schemas under registry names. Without tools, inline
                event blocks in the text become ``text_event`` items.
            params: Model, sampling parameters and ``extra_body``.
            tool_choice: Forces a call, ``{"type": "function", "function": {"name": ...}}``.

        Yields:
            A ``raw_chunk`` for every provider chunk, ``message_delta`` for visible text,
            ``text_event``s, ``provider_tool_call``s (registry names, index order, once
            complete) and at most one ``usage``.

        Raises:
            ValueError: The transcript breaks the tool protocol (nothing is sent).
            UsageError: The client is closed.
            ProviderHTTPError: The endpoint answered with an error status.
            ProviderTimeout: The endpoint did not answer, or stalled, within ``timeout``.
            ProviderConnectionError: The endpoint could not be reached.
            ProviderProtocolError: A malformed or truncated stream, or an error mid-stream.
        """
        validate_tool_transcript(messages)
        if self._closed:
            raise UsageError("the chat client is closed")
        request = build_chat_request(messages, tools, params, tool_choice)
        stream = ChunkStream(
            text_events=not tools,
            new_call_id=_new_call_id,
            resolve_name=request.aliases.to_registry,
            secrets=self._secret_bytes,
        )
        with map_provider_errors(self._endpoint, secrets=self._secrets, timeout=self._timeout):
            async with self._open(request, params.model) as response:
                await _require_event_stream(response, self._secrets)
                async for data in response.iter_bytes():
                    for item in stream.feed(data):
                        yield item
        for item in stream.finish():
            yield item

    def _validate_tool_transcript(self, messages: Sequence[ChatMessage]) -> None:
        """Raises ``ValueError`` if a strict provider would reject ``messages``.

        Uses no instance state, so it can be called unbound with any ``self``.
        """
        validate_tool_transcript(messages)

    def _open(
        self, request: ChatRequest, model: str
    ) -> AbstractAsyncContextManager[_StreamingResponse]:
        return self._sdk.chat.completions.with_streaming_response.create(
            model=model,
            messages=cast(Any, request.messages),
            stream=True,
            extra_body=request.options,
            extra_headers=self._request_headers,
        )


async def _require_event_stream(response: _StreamingResponse, secrets: Sequence[str]) -> None:
    """Rejects a 2xx answer that is a JSON document instead of an event stream."""
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith("application/json"):
        return
    await response.read()
    message = scrub(provider_message(response.http_response), secrets)
    raise ProviderProtocolError(f"expected an event stream, got a JSON answer: {message}")


def _check_base_url(base_url: str) -> None:
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"invalid base_url {base_url!r}: {exc}") from exc
    if url.scheme not in {"http", "https"} or not url.host:
        raise ConfigError(f"base_url must be an http:// or https:// URL, got {base_url!r}")


def _secrets(api_key: str | None, headers: Mapping[str, str]) -> tuple[str, ...]:
    found = [api_key] if api_key else []
    for name, value in headers.items():
        if name.lower() in _SECRET_HEADERS and value:
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.lower() in {"bearer", "basic", "token"}:
                found.append(credential)
    return tuple(sorted(set(found), key=len, reverse=True))


def _new_call_id() -> str:
    return f"call_{uuid4().hex}"
