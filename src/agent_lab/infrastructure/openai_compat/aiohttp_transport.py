"""An ``httpx`` transport that sends the openai SDK's requests over ``aiohttp``.

The SDK still builds every request (authentication, headers, retries with backoff,
its own timeouts); only the bytes travel through an ``aiohttp`` connection pool, whose
per-read cost is a fraction of ``httpcore``'s (``bench/bench_transport.py``). Two things
differ from the ready-made ``httpx-aiohttp`` transport, and both matter for a chat
client:

* **Errors keep their meaning.** A server that drops the connection is a connection
  error before the answer and a broken stream after it, as over ``httpx``; it is never
  reported as a *timeout* (``httpx-aiohttp`` maps every ``aiohttp`` connection error
  to ``httpx.ConnectTimeout``, so a refused or dropped connection read "timed out
  after 0.0 s"). No ``aiohttp`` exception escapes as itself.
* **A stale keep-alive connection is replaced, not failed.** ``aiohttp`` reuses an idle
  connection as long as its event loop has not yet processed the server's close.
  When the loop runs late (a busy process), a request can go out on a connection
  the server closed seconds ago, and fails with "server disconnected" before any
  answer. ``httpcore`` checks the socket before reuse; here a request that fails that
  way *on a reused connection* is sent again at once on another one (the server never
  saw it). Only fresh-connection failures reach the SDK, which retries them as
  configured.

Proxies come from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), read
once when the transport is made, as ``httpx`` does; ``aiohttp``'s own ``trust_env`` is
off, because it looks up ``.netrc`` in a worker thread on every request.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import httpx

__all__ = ["AiohttpTransport"]

_STALE_ATTEMPTS = 8
"""Stale pooled connections tried in a row before a failure counts (the SDK then retries)."""


class _Attempt:
    """What the trace hooks learn about one attempt: whether it reused a connection."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


async def _on_reuse(session: aiohttp.ClientSession, context: SimpleNamespace, _: Any) -> None:
    attempt = context.trace_request_ctx
    if isinstance(attempt, _Attempt):
        attempt.reused = True


class AiohttpTransport(httpx.AsyncBaseTransport):
    """Sends ``httpx`` requests through one ``aiohttp.ClientSession``, made on first use.

    Args:
        ssl_context: Verifies TLS connections.
        max_connections: Open connections at most (``None``: no limit); more requests
            wait for one to become free, within the request's ``pool`` timeout.
        keepalive_expiry: Seconds an idle connection is kept for reuse.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        max_connections: int | None = 1000,
        keepalive_expiry: float | None = 5.0,
    ) -> None:
        self._ssl = ssl_context
        self._limit = max_connections or 0
        self._keepalive = keepalive_expiry
        self._proxies = urllib.request.getproxies_environment()
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit, keepalive_timeout=self._keepalive, ssl=self._ssl
            )
            trace = aiohttp.TraceConfig()
            trace.on_connection_reuseconn.append(_on_reuse)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trace_configs=[trace],
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx keeps the cookies, if any
                auto_decompress=False,  # httpx decodes Content-Encoding
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Sends ``request``; the answer's body streams as it arrives.

        Raises:
            httpx.TransportError: The ``httpx`` error for what went wrong (connect,
                timeout, disconnect, malformed answer), chained to aiohttp's.
        """
        session = self._client()
        body = await request.aread()
        timeouts = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=timeouts.get("pool"),
            sock_connect=timeouts.get("connect"),
            sock_read=timeouts.get("read"),
        )
        headers = [
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() != "transfer-encoding"  # aiohttp frames the body itself
        ]
        # Credentials in the URL are already in the Authorization header (httpx put them
        # there); aiohttp refuses a URL with them next to that header.
        url = str(request.url.copy_with(userinfo=b"") if request.url.userinfo else request.url)
        for tries_left in range(_STALE_ATTEMPTS, -1, -1):
            attempt = _Attempt()
            try:
                response = await session.request(
                    request.method,
                    url,
                    headers=headers,
                    data=body or None,
                    allow_redirects=False,
                    compress=False,
                    timeout=timeout,
                    trace_request_ctx=attempt,
                    proxy=self._proxy(request.url),
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if attempt.reused and tries_left and _not_connector_error(exc):
                    continue  # the pooled connection was closed by the server
                raise _request_error(exc) from exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _request_error(exc) from exc
            break
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_ResponseStream(response),
            request=request,
            extensions=extensions,
        )

    def _proxy(self, url: httpx.URL) -> str | None:
        if not self._proxies:
            return None
        if urllib.request.proxy_bypass(url.host):  # NO_PROXY
            return None
        return self._proxies.get(url.scheme)

    async def aclose(self) -> None:
        """Closes every pooled connection. Idempotent."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


class _ResponseStream(httpx.AsyncByteStream):
    """The body one HTTP chunk at a time, as ``httpx`` hands it on.

    A provider writes each event as a chunk; handing them on one by one, even when
    several arrived in one read, keeps every event before a failing one deliverable.
    """

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while True:
                chunk, end_of_chunk = await content.readchunk()
                if chunk:
                    yield chunk
                elif not end_of_chunk:  # (b"", False) is the end of the body
                    return
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _body_error(exc) from exc

    async def aclose(self) -> None:
        self._response.release()  # an unfinished body closes the connection


def _not_connector_error(exc: BaseException) -> bool:
    return not isinstance(exc, aiohttp.ClientConnectorError)


def _request_error(exc: BaseException) -> httpx.TransportError:
    """The ``httpx`` error ``httpcore`` raises for the same failure before the answer."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout(message)
        return httpx.ConnectError(message)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, TimeoutError):
        return httpx.PoolTimeout(message)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("Server disconnected without sending a response.")
    if isinstance(exc, aiohttp.ClientOSError):
        return httpx.ReadError(message)
    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(message)  # a malformed status line or headers
    return httpx.TransportError(message)


def _body_error(exc: BaseException) -> httpx.TransportError:
    """The ``httpx`` error for a failure while the body streams."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, aiohttp.ClientPayloadError):  # said as httpcore says it
        chunked = isinstance(exc.__cause__, aiohttp.http_exceptions.TransferEncodingError)
        how = " (incomplete chunked read)" if chunked else ""
        message = f"peer closed connection without sending complete message body{how}"
    # A connection closed or reset mid-body: the stream was broken off.
    return httpx.RemoteProtocolError(message)
