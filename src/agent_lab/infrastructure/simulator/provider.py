"""An offline, OpenAI-compatible streaming model server for the lab's bundled scenarios.

``SimulatedProvider`` is an ASGI app that answers ``POST /v1/chat/completions`` the way
a real model endpoint does (SSE chunks, tool-call fragments, usage with cached
tokens), choosing its answer with keyword intent detection over the last user
message. ``SimulatedProviderServer`` runs it on a real socket, in a background thread
(``with``) or in the current event loop (``async with``); ``serve_forever`` is the
blocking entry point for ``agent-lab simulate``. See ``docs/simulated-provider.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agent_lab.domain.errors import ConfigError, UsageError
from agent_lab.infrastructure.simulator.latency import LatencyModel
from agent_lab.infrastructure.simulator.planner import PlanContext, Reply, plan_reply
from agent_lab.infrastructure.simulator.request import ChatRequest, InvalidRequest, parse_request
from agent_lab.infrastructure.simulator.usage import PrefixCache
from agent_lab.infrastructure.simulator.wire import (
    DONE,
    CompletionMeta,
    Frame,
    completion_body,
    completion_tokens,
    error_body,
    frames,
    sse,
    truncate,
    usage_body,
    usage_chunk,
)

__all__ = [
    "DEFAULT_PORT",
    "MODEL_ID",
    "LatencyModel",
    "SimulatedProvider",
    "SimulatedProviderServer",
    "serve_forever",
]

MODEL_ID = "agent-lab-sim"
"""The one model ``GET /v1/models`` lists (any model name is accepted in requests)."""

DEFAULT_PORT = 8765
"""Port ``serve_forever`` listens on when none is given."""

RECORDED_REQUESTS = 200
_STARTUP_TIMEOUT_SECONDS = 10.0
_SHUTDOWN_GRACE_SECONDS = 1


@dataclass(frozen=True)
class _Prepared:
    reply: Reply
    meta: CompletionMeta
    usage: dict[str, Any]
    key: str


class SimulatedProvider:
    """A deterministic stand-in for an OpenAI-compatible chat model.

    Args:
        latency: Timing of answers; ``None`` means the realistic default
            ``LatencyModel()`` (300 ms to first token, 40 tokens/s). Use
            ``LatencyModel.instant()`` in tests.
        seed: Seeds wording choices and ids; the same seed and request give the same
            answer.
        clock: Current time, for ``tomorrow``-style dates and ``created``
            (``datetime.now(UTC)`` by default).

    Attributes:
        app: The ASGI application.
        requests: The last 200 request bodies, oldest first (headers are never kept).
    """

    def __init__(
        self,
        latency: LatencyModel | None = None,
        *,
        seed: int = 0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.latency = latency if latency is not None else LatencyModel()
        self.seed = seed
        self.requests: deque[dict[str, Any]] = deque(maxlen=RECORDED_REQUESTS)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._cache = PrefixCache()
        self.app = self._build_app()

    def _build_app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
        ]
        handlers = {HTTPException: _http_error, Exception: _server_error}
        return Starlette(routes=routes, exception_handlers=handlers)

    async def _chat_completions(self, request: Request) -> Response:
        try:
            chat, raw = parse_request(await request.body())
        except InvalidRequest as exc:
            return _json(error_body(exc.message, param=exc.param), status=400)
        self.requests.append(raw)
        prepared = self._prepare(chat, raw)
        if chat.stream:
            return StreamingResponse(
                self._stream(prepared),
                media_type="text/event-stream; charset=utf-8",
                headers={"cache-control": "no-cache", "x-request-id": prepared.meta.id},
            )
        await asyncio.sleep(sum(self._delays(prepared, frames(prepared.reply, prepared.meta))))
        return _json(completion_body(prepared.reply, prepared.meta, prepared.usage))

    def _prepare(self, chat: ChatRequest, raw: dict[str, Any]) -> _Prepared:
        """Plan the answer to a validated request and account its usage."""
        key = _digest(self.seed, raw)
        now = self._clock()
        context = PlanContext(now=now, digest=key, rng=random.Random(f"{self.seed}:{key}"))
        reply = truncate(plan_reply(chat, context), chat.token_limit)
        usage = usage_body(self._cache.measure(chat, raw), completion_tokens(reply))
        meta = CompletionMeta(
            id=f"chatcmpl-{key[:29]}",
            created=int(now.timestamp()),
            model=chat.model,
            include_usage=chat.include_usage,
        )
        return _Prepared(reply=reply, meta=meta, usage=usage, key=key)

    def _delays(self, prepared: _Prepared, planned: list[Frame]) -> list[float]:
        return self.latency.delays(prepared.key, [frame.tokens for frame in planned])

    async def _stream(self, prepared: _Prepared) -> AsyncIterator[bytes]:
        # Frames that are due together go out in one write; deadlines are absolute so
        # a slow write does not push the rest of the stream back.
        planned = frames(prepared.reply, prepared.meta)
        loop = asyncio.get_running_loop()
        deadline, pending = loop.time(), bytearray()  # grows in place: linear, however many
        for frame, delay in zip(planned, self._delays(prepared, planned), strict=True):
            deadline += delay
            if deadline > loop.time():
                if pending:
                    yield bytes(pending)
                    pending.clear()
                await asyncio.sleep(max(deadline - loop.time(), 0))
            pending += sse(frame.chunk)
        if prepared.meta.include_usage:
            pending += sse(usage_chunk(prepared.meta, prepared.usage))
        yield bytes(pending + DONE)

    async def _models(self, request: Request) -> Response:
        return _json({"object": "list", "data": [_model_card()]})

    async def _model(self, request: Request) -> Response:
        if request.path_params["model_id"] != MODEL_ID:
            message = f"The model '{request.path_params['model_id']}' does not exist"
            return _json(error_body(message, param="model"), status=404)
        return _json(_model_card())


def _model_card() -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "agent-lab"}


def _digest(seed: int, raw: dict[str, Any]) -> str:
    body = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(f"{seed}:".encode() + body).hexdigest()


def _json(payload: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Invalid URL ({request.method} {request.url.path})"
    else:
        message = f"{exc.detail} ({request.method} {request.url.path})"
    return _json(error_body(message), status=exc.status_code)


async def _server_error(request: Request, exc: Exception) -> Response:
    return _json(error_body("The simulated provider failed.", "server_error"), status=500)


class SimulatedProviderServer:
    """Runs a ``SimulatedProvider`` on a real socket with uvicorn.

    ``with`` serves from a background thread; ``async with`` serves as a task in the
    running loop. The socket is bound on entry, so ``port`` (the real one when ``0``
    was asked) and ``base_url`` are ready inside the block.

    Args:
        provider: The app to serve.
        host: Interface to bind.
        port: Port to bind; ``0`` picks a free one.

    Raises:
        ConfigError: On entry, when the address cannot be bound or the server does
            not start.
    """

    def __init__(self, provider: SimulatedProvider, host: str = "127.0.0.1", port: int = 0) -> None:
        self.provider = provider
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            UsageError: the server is not running.
        """
        if self._port is None:
            raise UsageError("the simulated provider server is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``, what an OpenAI client takes as ``base_url``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self._requested_port), family=family)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {self.host}:{self._requested_port}: {exc.strerror or exc}"
            ) from exc
        self._port = sock.getsockname()[1]
        return sock

    def _new_server(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.provider.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=_SHUTDOWN_GRACE_SECONDS,
            backlog=4096,
        )
        self._server = uvicorn.Server(config)
        return self._server

    def __enter__(self) -> Self:
        sock = self._bind()
        server = self._new_server()
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="simulated-provider", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._stop_thread()
                raise ConfigError(f"the simulated provider did not start on {self.base_url}")
            time.sleep(0.005)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop_thread()

    def _stop_thread(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=_STARTUP_TIMEOUT_SECONDS)
        self._thread = self._server = None
        self._port = None

    async def __aenter__(self) -> Self:
        sock = self._bind()
        server = self._new_server()
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _STARTUP_TIMEOUT_SECONDS
        while not server.started:
            if self._task.done() or loop.time() > deadline:
                await self._stop_task()
                raise ConfigError(f"the simulated provider did not start on {self.base_url}")
            await asyncio.sleep(0.005)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stop_task()

    async def wait_closed(self) -> None:
        """Wait until the ``async with`` server stops (e.g. on SIGINT/SIGTERM)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _stop_task(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            # uvicorn exits with SystemExit when its startup fails; __aenter__ reports it.
            with contextlib.suppress(SystemExit):
                await self._task
        self._task = self._server = None
        self._port = None


def serve_forever(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    provider: SimulatedProvider | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted (Ctrl+C or SIGTERM); prints nothing itself.

    Args:
        host: Interface to bind.
        port: Port to bind; ``0`` picks a free one (``on_ready`` receives it).
        provider: What to serve; a default ``SimulatedProvider()`` when omitted.
        on_ready: Called with the ``base_url`` once the server accepts connections.

    Raises:
        ConfigError: The address cannot be bound.
    """

    async def main() -> None:
        async with SimulatedProviderServer(provider or SimulatedProvider(), host, port) as server:
            if on_ready is not None:
                on_ready(server.base_url)
            await server.wait_closed()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
