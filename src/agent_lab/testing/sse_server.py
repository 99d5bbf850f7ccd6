"""A real HTTP server on 127.0.0.1 that replays recorded SSE transcripts (a test double).

The server listens on an ephemeral port in a background thread with its own event loop,
so it serves sync and async tests alike. Every request consumes the next
``ScriptedResponse``: a stream of raw SSE byte chunks (with optional pauses, an abrupt
disconnect, extra headers) or a fixed error body with any status. Every request's
method, path, headers and body are recorded::

    server = SSETranscriptServer(
        ScriptedResponse.error(503, {"error": {"message": "busy"}}),
        ScriptedResponse.sse({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}),
    )
    with server:
        ...  # point a client at server.base_url
    assert server.request_count == 2
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from pathlib import Path
from typing import Any, Self

__all__ = ["Pause", "RecordedRequest", "SSETranscriptServer", "ScriptedResponse"]


@dataclass(frozen=True, slots=True)
class Pause:
    """A delay between two chunks of a streamed response."""

    seconds: float


Chunk = bytes | Pause
"""One write of a streamed body, or a pause."""


def _as_data(event: Mapping[str, Any] | str | bytes) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return event.encode()
    return json.dumps(event, separators=(",", ":")).encode()


@dataclass(frozen=True)
class ScriptedResponse:
    """What the server answers to one request."""

    chunks: tuple[Chunk, ...] = ()
    """The streamed body, written (and flushed) one chunk at a time."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers, e.g. ``Retry-After``."""
    body: bytes | None = None
    """A fixed body sent with ``Content-Length`` instead of a stream."""
    content_type: str = "text/event-stream"
    delay: float = 0.0
    """Seconds to wait before sending the status line."""
    abort: bool = False
    """Drop the connection after the chunks instead of ending the body."""

    @classmethod
    def sse(
        cls,
        *events: Mapping[str, Any] | str | bytes,
        done: bool = True,
        line_ending: str = "\n",
        pause: float = 0.0,
        **options: Any,
    ) -> ScriptedResponse:
        """Builds a stream with one ``data:`` event per chunk.

        Args:
            *events: JSON objects (serialized compactly) or raw data values.
            done: End with ``data: [DONE]``.
            line_ending: ``"\\n"`` or ``"\\r\\n"``.
            pause: Seconds between events.
            **options: Other ``ScriptedResponse`` fields.
        """
        end = line_ending.encode()
        payloads = [_as_data(event) for event in events] + ([b"[DONE]"] if done else [])
        chunks: list[Chunk] = []
        for payload in payloads:
            if pause and chunks:
                chunks.append(Pause(pause))
            chunks.append(b"data: " + payload + end + end)
        return cls(chunks=tuple(chunks), **options)

    @classmethod
    def error(
        cls,
        status: int,
        body: Mapping[str, Any] | str | bytes,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> ScriptedResponse:
        """Builds an error answer; a mapping body is sent as JSON, text as ``text/plain``."""
        content_type = "application/json" if isinstance(body, Mapping) else "text/plain"
        return cls(
            status=status,
            body=_as_data(body),
            headers=dict(headers or {}),
            content_type=content_type,
        )

    @classmethod
    def from_fixture(cls, path: str | Path) -> ScriptedResponse:
        """Loads a recorded transcript.

        The file is JSON: ``{"chunks": ["data: {...}\\n\\n", ...]}`` with optional
        ``status``, ``headers`` and ``content_type``. Each string is one network write.
        """
        recorded = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(
            chunks=tuple(chunk.encode() for chunk in recorded["chunks"]),
            status=recorded.get("status", 200),
            headers=dict(recorded.get("headers", {})),
            content_type=recorded.get("content_type", "text/event-stream"),
        )

    def split(self, size: int) -> ScriptedResponse:
        """The same stream re-cut into writes of ``size`` bytes (pauses are dropped)."""
        data = b"".join(chunk for chunk in self.chunks if isinstance(chunk, bytes))
        pieces = tuple(data[i : i + size] for i in range(0, len(data), size))
        return replace(self, chunks=pieces)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes
    received_at: float
    """``time.monotonic()`` when the request was complete."""

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


_NO_SCRIPT = ScriptedResponse.error(
    500, {"error": {"message": "the SSE transcript server has no scripted response left"}}
)


class SSETranscriptServer:
    """Replays ``ScriptedResponse``s, one per request, and records every request."""

    def __init__(
        self,
        *responses: ScriptedResponse,
        fallback: ScriptedResponse | None = None,
        keep_alive: float | None = None,
    ) -> None:
        """Prepares the server; ``start()`` (or ``with``) opens the port.

        Args:
            *responses: Answers to the first requests, in order.
            fallback: The answer once they are used up (default: a 500 error).
            keep_alive: Seconds a connection may sit idle between requests before the
                server closes it, as real servers do; ``None`` keeps it open.
        """
        self._keep_alive = keep_alive
        self._script: deque[ScriptedResponse] = deque(responses)
        self._fallback = fallback or _NO_SCRIPT
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._port = 0
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        """The ephemeral port (0 before ``start()``)."""
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-style API root, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests were received."""
        with self._lock:
            return len(self._requests)

    def add(self, *responses: ScriptedResponse) -> None:
        """Appends answers for later requests."""
        with self._lock:
            self._script.extend(responses)

    def start(self) -> None:
        """Opens the port and serves in a background thread (blocks until listening)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="sse-transcript-server", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._failure is not None or not self._port:
            raise RuntimeError("the SSE transcript server did not start") from self._failure

    def stop(self) -> None:
        """Closes the port and every open connection, then joins the thread.

        Connections a client still holds open (idle keep-alive ones included) are closed
        quietly: nothing is logged or printed.
        """
        if self._thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            with suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.stop)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start(), which re-raises
            self._failure = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        connections: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await self._connection(reader, writer)
            except asyncio.CancelledError:
                # Cancelled by stop(): end normally, for asyncio (before Python 3.12)
                # logs a handler task that ends cancelled as an error with a traceback.
                pass
            finally:
                connections.discard(task)

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopping.wait()
            server.close()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            async with asyncio.timeout(self._keep_alive):
                request = await _read_request(reader)
        except TimeoutError:  # idle past the keep-alive time: close
            return False
        if request is None:
            return False
        with self._lock:
            self._requests.append(request)
            scripted = self._script.popleft() if self._script else self._fallback
        if scripted.delay:
            await asyncio.sleep(scripted.delay)
        if scripted.body is not None:
            writer.write(_head(scripted, len(scripted.body)) + scripted.body)
            await writer.drain()
            return True
        return await _stream(scripted, writer)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
    return RecordedRequest(method, path, headers, body, time.monotonic())


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _head(scripted: ScriptedResponse, length: int | None) -> bytes:
    try:
        reason = HTTPStatus(scripted.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {scripted.status} {reason}", f"Content-Type: {scripted.content_type}"]
    if length is None:
        lines += ["Transfer-Encoding: chunked", "Cache-Control: no-cache"]
    else:
        lines.append(f"Content-Length: {length}")
    if scripted.abort:
        lines.append("Connection: close")
    lines += [f"{name}: {value}" for name, value in scripted.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _stream(scripted: ScriptedResponse, writer: asyncio.StreamWriter) -> bool:
    writer.write(_head(scripted, None))
    await writer.drain()
    for chunk in scripted.chunks:
        if isinstance(chunk, Pause):
            await asyncio.sleep(chunk.seconds)
        elif chunk:
            writer.write(b"%X\r\n%b\r\n" % (len(chunk), chunk))
            await writer.drain()
    if scripted.abort:
        writer.transport.abort()
        return False
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True
