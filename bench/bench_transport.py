"""Benchmark: HTTP transports side by side for many concurrent paced streams.

Run from the project root::

    .venv/bin/python -m bench --only transport
    .venv/bin/python -m bench.bench_transport [--quick] [--sessions 100 1000]

The simulated provider (``bench/_sim_server.py``: 300 ms to first token, 40 tokens/s,
every chunk stamped with its send time) runs in another process. N streams start spread
over one second; each is one streamed chat call whose chunks go through the real chunk
parser (``ChunkStream``). Delay = receive time − send stamp, per chunk. CPU is this
process only. Transports:

- the chat client (openai SDK request path) over ``httpx`` (the default);
- the chat client over ``httpx-aiohttp`` (``openai.DefaultAioHttpClient``);
- ``httpx`` directly, no SDK (the httpx floor);
- ``aiohttp`` directly, no SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import openai  # noqa: E402

from agent_lab.application.contracts import AgentParams  # noqa: E402
from agent_lab.domain.messages import ChatMessage, StreamItem  # noqa: E402
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient  # noqa: E402
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream  # noqa: E402
from bench._common import Check, Report, percentile, server_process, table  # noqa: E402

SERVER = Path(__file__).with_name("_sim_server.py")
BODY = {
    "model": "agent-lab-sim",
    "messages": [{"role": "user", "content": "Tell me about the weather in Zurich."}],
    "stream": True,
}
Stream = Callable[[int], AsyncIterator[StreamItem]]
Transport = Callable[[str, int], Any]
"""(base_url, sessions) -> async context manager yielding a ``Stream`` factory."""


def _parser() -> ChunkStream:
    return ChunkStream(text_events=True, new_call_id=lambda: "call_bench")


class _ChatClient:
    def __init__(self, base_url: str, http: httpx.AsyncClient) -> None:
        self.http = http
        self.client = OpenAICompatibleChatClient(base_url, http_client=http, max_retries=0)

    async def __aenter__(self) -> Stream:
        await self.client.warm_up()
        messages = [ChatMessage(role="user", content=BODY["messages"][0]["content"])]
        params = AgentParams(model="agent-lab-sim")
        return lambda _: self.client.stream_chat(messages, [], params)

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self.http.aclose()


def chat_client_httpx(base_url: str, sessions: int) -> _ChatClient:
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    return _ChatClient(base_url, httpx.AsyncClient(limits=limits, timeout=120))


def chat_client_httpx_aiohttp(base_url: str, sessions: int) -> _ChatClient:
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    return _ChatClient(base_url, openai.DefaultAioHttpClient(limits=limits, timeout=120))


class _HttpxDirect:
    def __init__(self, base_url: str, sessions: int) -> None:
        limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
        self.http = httpx.AsyncClient(limits=limits, timeout=120)
        self.url = base_url + "/chat/completions"

    async def __aenter__(self) -> Stream:
        async def stream(_: int) -> AsyncIterator[StreamItem]:
            parser = _parser()
            async with self.http.stream("POST", self.url, json=BODY) as response:
                async for data in response.aiter_bytes():
                    for item in parser.feed(data):
                        yield item
            for item in parser.finish():
                yield item

        return stream

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()


class _AiohttpDirect:
    def __init__(self, base_url: str, sessions: int) -> None:
        self.url = base_url + "/chat/completions"
        self.sessions = sessions

    async def __aenter__(self) -> Stream:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.sessions)
        self.session = aiohttp.ClientSession(connector=connector)

        async def stream(_: int) -> AsyncIterator[StreamItem]:
            parser = _parser()
            async with self.session.post(self.url, json=BODY) as response:
                async for data in response.content.iter_any():
                    for item in parser.feed(data):
                        yield item
            for item in parser.finish():
                yield item

        return stream

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()


TRANSPORTS: dict[str, Transport] = {
    "chat client over httpx (default)": chat_client_httpx,
    "chat client over httpx-aiohttp": chat_client_httpx_aiohttp,
    "httpx directly (no SDK)": _HttpxDirect,
    "aiohttp directly (no SDK)": _AiohttpDirect,
}
if importlib.util.find_spec("httpx_aiohttp") is None:  # the ``bench`` extra is not installed
    del TRANSPORTS["chat client over httpx-aiohttp"], TRANSPORTS["aiohttp directly (no SDK)"]


async def _one(stream: Stream, n: int, delays: list[float]) -> None:
    async for item in stream(n):
        if item.kind == "raw_chunk" and item.raw_chunk is not None:
            stamp = item.raw_chunk.get("t")
            if isinstance(stamp, float):
                delays.append(time.perf_counter() - stamp)


async def measure(
    transport: Transport, base_url: str, sessions: int
) -> tuple[dict[str, float], list[str]]:
    delays: list[float] = []
    failures: list[str] = []
    async with transport(base_url, sessions) as stream:
        await _one(stream, -1, [])  # warm: imports, first connection

        async def staggered(n: int) -> None:
            await asyncio.sleep(n / sessions)
            try:
                await _one(stream, n, delays)
            except Exception as exc:  # counted, and named in the report
                cause = f" ({type(exc.__cause__).__name__})" if exc.__cause__ else ""
                failures.append(type(exc).__name__ + cause)

        cpu, wall = time.process_time(), time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for n in range(sessions):
                group.create_task(staggered(n))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ms = [d * 1000 for d in delays] or [float("nan")]
    return {
        "p50": percentile(ms, 0.5),
        "p99": percentile(ms, 0.99),
        "max": max(ms),
        "cpu": cpu / wall * 100,
        "wall": wall,
        "chunks": float(len(ms)),
        "failed": float(len(failures)),
    }, sorted(set(failures))


def _run_all(
    sizes: list[int], runner: Callable[[Awaitable[Any]], Any]
) -> tuple[dict[tuple[int, str], dict[str, float]], list[str]]:
    results: dict[tuple[int, str], dict[str, float]] = {}
    notes: list[str] = []
    with server_process(SERVER) as base_url:
        for sessions in sizes:
            for name, transport in TRANSPORTS.items():
                figures, failures = runner(measure(transport, base_url, sessions))
                results[sessions, name] = figures
                if failures:
                    notes.append(f"{name}, {sessions} streams: {', '.join(failures)}")
    return results, notes


def run(quick: bool = False, sizes: list[int] | None = None) -> Report:
    sizes = sizes or ([10] if quick else [100, 1000])
    results, notes = _run_all(sizes, asyncio.run)
    rows = [
        (
            name,
            sessions,
            int(r["chunks"]),
            f"{r['p50']:.1f}",
            f"{r['p99']:.1f}",
            f"{r['max']:.0f}",
            f"{r['cpu']:.0f}",
            f"{r['wall']:.1f}",
            int(r["failed"]),
        )
        for (sessions, name), r in results.items()
    ]
    header = ["transport", "streams", "chunks", "p50 ms", "p99 ms", "max ms", "CPU %", "wall s"]
    header.append("failed")
    markdown = (
        "One streamed call per stream, started evenly over 1 s; provider in another process "
        "(300 ms TTFT, 40 tokens/s). Delay from the provider's send stamp to the parsed chunk; "
        "CPU of this process only, in % of one core.\n\n" + table(header, rows, left=1)
    )
    if notes:
        markdown += "\n\nFailed streams: " + "; ".join(notes) + "."
    largest = max(sizes)
    ours = results[largest, "chat client over httpx (default)"]["p99"]
    figures = {f"p99[{s}][{n}]": r["p99"] for (s, n), r in results.items()}
    return Report(
        "HTTP transports side by side",
        ".venv/bin/python -m bench --only transport",
        markdown,
        [
            Check(
                "transport",
                f"p99 delay, chat client over httpx, {largest} streams",
                f"{ours:.1f} ms",
                "≤ 50 ms",
                ours <= 50.0,
            )
        ],
        figures,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, nargs="*", default=None)
    args = parser.parse_args()
    print(run(args.quick, args.sessions).markdown)


if __name__ == "__main__":
    main()
