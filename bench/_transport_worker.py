"""One client process of the transport benchmark (``bench_transport`` starts these).

    python -m bench._transport_worker CLIENT LOOP BASE_URL STREAMS OUT [--profile N]

Warms up (imports, a first connection), prints ``ready``, waits for a start time
(``time.perf_counter()`` of the shared monotonic clock) on stdin, then runs STREAMS
streamed calls started evenly over one second from it, and writes its figures as JSON
to the file OUT. The heap built while warming up is frozen (``gc.freeze``), as
``agent-lab serve`` does once started. ``--profile N`` adds the N functions with the
most own CPU time.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import importlib
import io
import json
import pstats
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream

QUESTION = "Tell me about the weather in Zurich."
BODY = {
    "model": "agent-lab-sim",
    "messages": [{"role": "user", "content": QUESTION}],
    "stream": True,
}
LAG_TICK = 0.005
"""Seconds between the loop-lag monitor's wake-ups."""
Stream = Callable[[], AsyncIterator[StreamItem]]
Client = Callable[[str, int], AbstractAsyncContextManager[Stream]]


def _parser() -> ChunkStream:
    return ChunkStream(text_events=True, new_call_id=lambda: "call_bench")


@asynccontextmanager
async def _chat_client(
    base_url: str, http: httpx.AsyncClient | None, transport: Any = "httpx"
) -> AsyncIterator[Stream]:
    client = OpenAICompatibleChatClient(
        base_url, http_client=http, max_retries=0, transport=transport
    )
    messages = [ChatMessage(role="user", content=QUESTION)]
    params = AgentParams(model="agent-lab-sim")
    try:
        yield lambda: client.stream_chat(messages, [], params)
    finally:
        await client.aclose()
        if http is not None:
            await http.aclose()


def chat_httpx(base_url: str, streams: int) -> AbstractAsyncContextManager[Stream]:
    return _chat_client(base_url, None, "httpx")


def chat_aiohttp(base_url: str, streams: int) -> AbstractAsyncContextManager[Stream]:
    return _chat_client(base_url, None, "aiohttp")


def chat_httpx_aiohttp(base_url: str, streams: int) -> AbstractAsyncContextManager[Stream]:
    import openai

    return _chat_client(base_url, openai.DefaultAioHttpClient(timeout=120))


@asynccontextmanager
async def httpx_direct(base_url: str, streams: int) -> AsyncIterator[Stream]:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    url = base_url + "/chat/completions"
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:

        async def stream() -> AsyncIterator[StreamItem]:
            parser = _parser()
            async with http.stream("POST", url, json=BODY) as response:
                async for data in response.aiter_bytes():
                    for item in parser.feed(data):
                        yield item
            for item in parser.finish():
                yield item

        yield stream


@asynccontextmanager
async def aiohttp_direct(base_url: str, streams: int) -> AsyncIterator[Stream]:
    import aiohttp

    url = base_url + "/chat/completions"
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def stream() -> AsyncIterator[StreamItem]:
            parser = _parser()
            async with session.post(url, json=BODY) as response:
                async for data in response.content.iter_any():
                    for item in parser.feed(data):
                        yield item
            for item in parser.finish():
                yield item

        yield stream


CLIENTS: dict[str, Client] = {
    "chat-httpx": chat_httpx,
    "chat-aiohttp": chat_aiohttp,
    "chat-httpx-aiohttp": chat_httpx_aiohttp,
    "httpx": httpx_direct,
    "aiohttp": aiohttp_direct,
}


async def _drain(stream: Stream, delays: list[float]) -> None:
    async for item in stream():
        if item.kind == "raw_chunk" and item.raw_chunk is not None:
            stamp = item.raw_chunk.get("t")
            if isinstance(stamp, float):
                delays.append(time.perf_counter() - stamp)


def _failure(exc: BaseException) -> str:
    chain: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 4:
        chain.append(f"{type(current).__name__}: {str(current)[:80]}")
        current = current.__cause__ or current.__context__
    return " <- ".join(chain)


async def _lag_monitor(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(LAG_TICK)
        lags.append(loop.time() - before - LAG_TICK)


async def _run(client: Client, base_url: str, streams: int) -> dict[str, Any]:
    delays: list[float] = []
    failures: list[str] = []
    lags: list[float] = []
    async with client(base_url, streams) as stream:
        await _drain(stream, [])  # warm: imports, the first connection
        gc.collect()
        gc.freeze()  # as `agent-lab serve` does once started: no full passes over it
        print("ready", flush=True)
        start = float(await asyncio.to_thread(sys.stdin.readline))

        async def staggered(n: int) -> None:
            await asyncio.sleep(max(0.0, start + n / streams - time.perf_counter()))
            try:
                await _drain(stream, delays)
            except Exception as exc:  # counted, and named in the report
                failures.append(_failure(exc))

        stop = asyncio.Event()
        monitor = asyncio.create_task(_lag_monitor(lags, stop))
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        cpu, wall = time.process_time(), time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for n in range(streams):
                group.create_task(staggered(n))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        stop.set()
        await monitor
    return {
        "delays_ms": [round(d * 1000, 3) for d in delays],
        "cpu_s": cpu,
        "wall_s": wall,
        "max_lag_ms": max(lags, default=0.0) * 1000,
        "failures": failures,
    }


def _profiled(run: Callable[[], dict[str, Any]], top: int) -> dict[str, Any]:
    profile = cProfile.Profile()
    figures = profile.runcall(run)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    figures["profile"] = out.getvalue()
    return figures


def main(argv: list[str]) -> None:
    client, loop, base_url, streams, out = argv[:5]
    top = int(argv[6]) if len(argv) > 6 and argv[5] == "--profile" else 0

    def run() -> dict[str, Any]:
        coroutine = _run(CLIENTS[client], base_url, int(streams))
        if loop == "uvloop":  # the bench extra's; imported by name so mypy passes without it
            uvloop = importlib.import_module("uvloop")
            figures: dict[str, Any] = uvloop.run(coroutine)
            return figures
        return asyncio.run(coroutine)

    figures = _profiled(run, top) if top else run()
    Path(out).write_text(json.dumps(figures), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
