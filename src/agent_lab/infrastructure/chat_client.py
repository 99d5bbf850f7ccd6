"""The streaming chat client for OpenAI-compatible endpoints (OpenAI, vLLM, Ollama, ...).

The official ``openai`` SDK sends the request (authentication, retries with backoff on
408/409/429/5xx and connection errors honouring ``Retry-After``); the client reads the
raw event stream itself, so no typed chunk objects are built, and keeps its own two
deadlines per call (idle on content, total), retries included. See ``chunk_parser`` for
the per-chunk work, ``stream_body`` for refusing answers that are no event stream,
``provider_errors`` for error mapping and ``secret_mask`` for how credentials are kept
out of everything the client hands on.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Self, cast
from uuid import uuid4

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.errors import ConfigError, DeadlineKind, ProviderDeadlineExceeded, UsageError
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.openai_compat.chat_stream import ChatStream, report_at_end
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream
from agent_lab.infrastructure.openai_compat.client_options import endpoint_of, endpoint_url
from agent_lab.infrastructure.openai_compat.log_redaction import install_url_redaction
from agent_lab.infrastructure.openai_compat.provider_errors import map_provider_errors
from agent_lab.infrastructure.openai_compat.reasoning_memory import ReasoningMemory
from agent_lab.infrastructure.openai_compat.request_body import ChatRequest, build_chat_request
from agent_lab.infrastructure.openai_compat.retry_deadline import (
    DeadlineAwareOpenAI,
    RetriedAnswers,
    retry_deadline,
)
from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask, redact_url
from agent_lab.infrastructure.openai_compat.stream_body import event_stream_chunks
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript
from agent_lab.infrastructure.openai_transport import (
    DEFAULT_TRANSPORT,
    Transport,
    check_transport,
    new_http_client,
)

__all__ = ["ChatStream", "OpenAICompatibleChatClient", "map_provider_errors"]

install_url_redaction()  # a base URL's ``?api-key=`` stays out of httpx's log lines

_UNUSED_KEY = "no-key"
"""Placeholder the SDK insists on; its ``Authorization`` header is omitted on every request."""
_SLACK = 5.0
"""Seconds the SDK's own per-attempt timeouts lie beyond our deadlines, so ours fire first."""
_CONNECT_PROBE_TIMEOUT = 10.0

_StreamingResponse = openai.AsyncAPIResponse[openai.AsyncStream[Any]]
_STREAMED: dict[str, str] = {"X-Stainless-Raw-Response": "stream"}
"""Asks the SDK for the unread response, as ``with_streaming_response`` does."""


class OpenAICompatibleChatClient:
    """Streams chat completions from an OpenAI-compatible ``/chat/completions`` endpoint.

    Implements the ``ChatClient`` port. Use it as an async context manager, or call
    ``aclose()`` when done. Building one makes no connection; it warms the client up.

    The SDK's request modules and a shared TLS context are made with this module.
    Building the SDK client runs here when no event loop is running, else in a
    worker thread so the loop does not stall; ``await warm_up()`` waits for it.
    A call waits for it only if it is still running, and then
    ``CallTiming.warmup_ms`` says how long.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``. ``user:pass@`` in it
            is sent as ``Authorization: Basic``, a query (``?api-key=…``) with every
            request after the endpoint's path; both are masked everywhere.
        api_key: Sent as ``Authorization: Bearer``; ``None`` sends no credentials (the
            ``OPENAI_API_KEY`` environment variable is deliberately not read).
        timeout: The idle deadline in seconds: the longest wait for content, from the
            start of the call (retries and backoff included) and between chunks. SSE
            comments (``: keep-alive``) and empty events do not count as content.
        total_timeout: The deadline for the whole call, retries and streaming
            included; ``None`` for none.
        max_retries: Retries after 408/409/429/5xx answers and connection failures,
            all within the deadlines.
        default_headers: Extra headers sent with every request.
        http_client: A client to send requests with; the caller keeps ownership.
        transport: How the client's own requests travel when no ``http_client`` is
            given: ``"aiohttp"`` (far less CPU per stream) or ``"httpx"``. See
            ``openai_transport``.

    Raises:
        ConfigError: ``base_url`` is not an http(s) URL or repeats a query parameter,
            it carries ``user:pass@`` next to an ``api_key`` or an ``Authorization``
            header, the key or a header value cannot be sent in an HTTP header, a
            deadline is not positive, or the transport is unknown or not installed.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        total_timeout: float | None = 600.0,
        max_retries: int = 2,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: Transport = DEFAULT_TRANSPORT,
    ) -> None:
        endpoint = endpoint_of(base_url, api_key, default_headers or {})
        if not timeout > 0 or (total_timeout is not None and not total_timeout > 0):
            raise ConfigError("timeout and total_timeout must be positive seconds")
        self._base_url = base_url
        self._display_url = redact_url(base_url)
        self._endpoint = redact_url(endpoint_url(base_url, "chat/completions"))
        self._idle = float(timeout)
        self._total = math.inf if total_timeout is None else float(total_timeout)
        self._mask = SecretMask(endpoint.secrets)
        headers = endpoint.headers
        sends_auth = bool(api_key) or any(k.lower() == "authorization" for k in headers)
        self._request_headers: dict[str, str | openai.Omit] = (
            {} if sends_auth else {"Authorization": openai.Omit()}
        )
        self._owns_http_client = http_client is None
        self._transport = check_transport(transport)
        self._closed = False
        self._reasoning = ReasoningMemory()
        attempt = min(self._idle, self._total) + _SLACK
        self._sdk_options: dict[str, Any] = {
            "api_key": api_key or _UNUSED_KEY,
            "base_url": endpoint.base_url,
            "default_query": endpoint.query or None,
            "timeout": httpx.Timeout(attempt),
            "max_retries": max_retries,
            "default_headers": headers or None,
            "http_client": http_client,
        }
        self._sdk: openai.AsyncOpenAI | None = None
        self._post: Callable[..., Awaitable[Any]] | None = None
        self._options: dict[str, Any] = {}
        self._warming: asyncio.Future[None] | None = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._warm()
        else:
            self._warming = loop.run_in_executor(None, self._warm)
            self._warming.add_done_callback(_retrieve)

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._base_url

    @property
    def warm(self) -> bool:
        """Whether the SDK's request path is imported and built."""
        return self._post is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._display_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def warm_up(self, *, connect: bool = False) -> bool:
        """Waits until the client is warm, optionally opening a connection ahead of use.

        Args:
            connect: Also send ``GET {base_url}/models`` so that the first call finds an
                open keep-alive connection. Any answer, even an error status, will do.

        Returns:
            Whether a connection was opened (always ``False`` without ``connect``).
        """
        await self._await_warm()
        if not connect or self._closed:
            return False
        sdk = cast(openai.AsyncOpenAI, self._sdk)
        options: Any = {"max_retries": 0, "headers": self._request_headers}
        try:
            async with asyncio.timeout(min(self._idle, _CONNECT_PROBE_TIMEOUT)):
                await sdk.get("/models", cast_to=httpx.Response, options=options)
        except openai.APIStatusError:
            return True
        except (openai.OpenAIError, httpx.HTTPError, TimeoutError):
            return False
        return True

    @property
    def is_closed(self) -> bool:
        """``aclose()`` was called: the client streams no more."""
        return self._closed

    async def aclose(self) -> None:
        """Closes the connection pool (not an ``http_client`` passed in). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._warming is not None and not self._warming.done():
            with contextlib.suppress(Exception):  # a failed warm-up has nothing to close
                await asyncio.shield(self._warming)
        if self._owns_http_client and self._sdk is not None:
            await self._sdk.close()

    def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> ChatStream:
        """Streams one chat completion.

        Args:
            messages: The transcript; checked against the tool protocol before sending.
            tools: OpenAI function schemas under registry names. Without tools, inline
                event blocks in the text become ``text_event`` items.
            params: Model, sampling parameters and ``extra_body``.
            tool_choice: Forces a call, ``{"type": "function", "function": {"name": ...}}``.

        Returns:
            A ``ChatStream`` of ``raw_chunk`` items for every provider chunk,
            ``message_delta`` for visible text, ``text_event``s, ``provider_tool_call``s
            (registry names, index order, once complete) and at most one ``usage``; its
            ``timing`` tells warm-up, connection and provider time apart.

        Raises (while iterating):
            ValueError: The transcript breaks the tool protocol (nothing is sent).
            UsageError: The client is closed.
            ProviderHTTPError: The endpoint answered with an error status.
            ProviderDeadlineExceeded: The idle or the total deadline passed.
            ProviderTimeout: Another timeout inside the HTTP stack.
            ProviderConnectionError: The endpoint could not be reached.
            ProviderProtocolError: A malformed or truncated stream, or an error mid-stream.
        """
        return ChatStream(
            lambda out: self._stream(messages, tools, params, tool_choice, out), CallTiming()
        )

    async def _stream(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None,
        out: ChatStream,
    ) -> AsyncIterator[StreamItem]:
        timing = out.timing
        validate_tool_transcript(messages)
        if self._closed:
            raise UsageError("the chat client is closed")
        request = build_chat_request(messages, tools, params, tool_choice, self._reasoning.recall)
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._post is None:
            await self._await_warm()
            timing.warmup_ms = _ms(loop.time() - started)
        sent = loop.time()
        stream = ChunkStream(
            text_events=not tools,
            new_call_id=_new_call_id,
            resolve_name=request.aliases.to_registry,
            mask=self._mask,
        )
        idle, total_deadline = self._idle, started + self._total
        with (
            map_provider_errors(
                self._endpoint, mask=self._mask, elapsed=lambda: loop.time() - started
            ),
            report_at_end(out, stream, loop, sent),
        ):
            async with AsyncExitStack() as stack:
                chunks = await self._connect(stack, request, params.model, started, sent, timing)
                last_content, progress = started, 0
                while True:
                    deadline = min(last_content + idle, total_deadline)
                    try:
                        async with asyncio.timeout_at(deadline):
                            data = await chunks.__anext__()
                    except StopAsyncIteration:
                        break
                    except httpx.TransportError:
                        if stream.finished:
                            break  # reset after the finished answer, before [DONE]: no loss
                        raise
                    except TimeoutError:
                        elapsed = loop.time() - started
                        raise self._expired(deadline, total_deadline, elapsed) from None
                    items = stream.feed(data)
                    if stream.progress != progress:
                        progress, last_content = stream.progress, loop.time()
                    if items and timing.first_chunk_ms is None:
                        timing.first_chunk_ms = _ms(loop.time() - sent)
                    for item in items:
                        self._reasoning.keep(item, stream.reasoning)
                        yield item
                    if stream.done:
                        break  # a connection held open after [DONE] is not waited for
        for item in stream.finish():
            self._reasoning.keep(item, stream.reasoning)
            yield item

    async def _connect(
        self,
        stack: AsyncExitStack,
        request: ChatRequest,
        model: str,
        started: float,
        sent: float,
        timing: CallTiming,
    ) -> AsyncIterator[bytes]:
        """Open the answer on ``stack`` (retries included) within the first deadline."""
        loop = asyncio.get_running_loop()
        total_deadline = started + self._total
        deadline = min(started + self._idle, total_deadline)
        retried = RetriedAnswers(deadline)
        try:
            async with asyncio.timeout_at(deadline):
                with retry_deadline(retried):  # no retry wait past it
                    response = await stack.enter_async_context(self._open(request, model))
                chunks = await event_stream_chunks(response, self._mask)
        except TimeoutError:
            if retried.error is not None:  # the error answer the retries outlasted
                raise retried.error from None
            raise self._expired(deadline, total_deadline, loop.time() - started) from None
        timing.connect_ms = _ms(loop.time() - sent)
        timing.attempts = 1 + response.retries_taken
        return chunks

    def _expired(self, deadline: float, total: float, elapsed: float) -> ProviderDeadlineExceeded:
        kind: DeadlineKind = "total" if deadline >= total else "idle"
        limit = self._total if kind == "total" else self._idle
        return ProviderDeadlineExceeded(self._endpoint, kind, limit, elapsed)

    def _warm(self) -> None:
        """Builds the SDK client (about 1 ms) and binds its request path."""
        if self._post is None:
            options = dict(self._sdk_options)
            if options["http_client"] is None:  # ours, closed with the SDK client
                options["http_client"] = new_http_client(self._transport, options["timeout"])
            sdk = DeadlineAwareOpenAI(**options)
            sdk.platform_headers()  # cached by the SDK; reads OS files on first use
            self._options = {"headers": {**self._request_headers, **_STREAMED}}
            self._sdk, self._post = sdk, sdk.post

    async def _await_warm(self) -> None:
        if self._post is not None:
            return
        if self._warming is None or self._warming.done():  # none yet, or it failed: retry
            self._warming = asyncio.get_running_loop().run_in_executor(None, self._warm)
        await asyncio.shield(self._warming)

    def _validate_tool_transcript(self, messages: Sequence[ChatMessage]) -> None:
        """Raises ``ValueError`` if a strict provider would reject ``messages``.

        Uses no instance state, so it can be called unbound with any ``self``.
        """
        validate_tool_transcript(messages)

    def _open(
        self, request: ChatRequest, model: str
    ) -> AbstractAsyncContextManager[_StreamingResponse]:
        """Send the request through the SDK's own request path (auth, retries, errors).

        The body is wire JSON already, so it goes out as it is: the typed
        ``chat.completions.create`` would first walk every field against its TypedDicts
        (about a third of the SDK's CPU per call) and change nothing in such a body.
        """
        post = cast(Callable[..., Awaitable[_StreamingResponse]], self._post)
        body = {"messages": request.messages, "model": model, "stream": True}
        body.update(request.options)  # ``extra_body`` may name another model, as before
        return _opened(
            post(
                "/chat/completions",
                cast_to=ChatCompletion,
                body=body,
                options=self._options,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
        )


@contextlib.asynccontextmanager
async def _opened(pending: Awaitable[_StreamingResponse]) -> AsyncIterator[_StreamingResponse]:
    """The unread answer, closed on the way out."""
    response = await pending
    try:
        yield response
    finally:
        await response.close()


def _new_call_id() -> str:
    return f"call_{uuid4().hex}"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _retrieve(future: asyncio.Future[None]) -> None:
    """Marks a background warm-up's failure as seen; the next call retries and reports it."""
    if not future.cancelled():
        future.exception()
