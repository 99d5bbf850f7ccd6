"""Benchmark 2: client CPU per chunk on the wire path, from socket bytes to output message.

Run from the project root::

    .venv/bin/python -m bench --only wire
    .venv/bin/python -m bench.bench_wire [--quick]

``bench/_wire_server.py`` runs in a separate process and streams pre-encoded
``chat.completion.chunk`` events over HTTP/1.1 (so its work never counts). Two stream
shapes: ``burst`` writes the whole body as fast as the socket takes it (many events
per read), ``paced`` writes one event at a time about 100 µs apart (one event per
read, like a real token stream). We measure this process's CPU time per chunk for:
a transport floor (httpx ``aiter_bytes``, no parsing), ``OpenAICompatibleChatClient``
+ ``DebugRuntime.run`` (to the output-queue message), the raw ``openai`` SDK
``AsyncStream`` (typed chunks, no runtime), the Agents SDK's
``OpenAIChatCompletionsModel`` and Pydantic AI's ``OpenAIChatModel`` (full runs).
Each measurement reuses a warm keep-alive connection.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import openai

from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from bench import _peers
from bench._common import Check, Report, drain, interleaved, median, request, server_process, table

SERVER = Path(__file__).with_name("_wire_server.py")
TARGET_US = 10.0
Work = Callable[[httpx.AsyncClient, str], Awaitable[Any]]


async def transport_floor(http: httpx.AsyncClient, base: str) -> None:
    async with http.stream("POST", base + "/chat/completions", json={}) as response:
        async for _ in response.aiter_bytes():
            pass


async def agent_lab(http: httpx.AsyncClient, base: str) -> None:
    client = OpenAICompatibleChatClient(base, http_client=http)
    await drain(DebugRuntime(client).run(request()))


def _sdk(http: httpx.AsyncClient, base: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base, api_key="unused", http_client=http)


async def openai_sdk(http: httpx.AsyncClient, base: str) -> None:
    stream = await _sdk(http, base).chat.completions.create(
        model="bench-model", messages=[{"role": "user", "content": "Hello."}], stream=True
    )
    async for chunk in stream:
        if chunk.choices:
            _ = chunk.choices[0].delta.content


async def agents_sdk(http: httpx.AsyncClient, base: str) -> None:
    from agents import OpenAIChatCompletionsModel

    await _peers.agents_stream(OpenAIChatCompletionsModel("bench-model", _sdk(http, base)))


async def pydantic_ai(http: httpx.AsyncClient, base: str) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(openai_client=_sdk(http, base))
    await _peers.pydantic_ai_stream(OpenAIChatModel("bench-model", provider=provider))


def clients() -> dict[str, Work]:
    found: dict[str, Work] = {
        "transport floor (httpx aiter_bytes)": transport_floor,
        "agent_lab client + DebugRuntime.run": agent_lab,
        f"openai SDK {openai.__version__} AsyncStream (typed chunks only)": openai_sdk,
    }
    peers = _peers.available()
    if "openai-agents" in peers:
        found[f"OpenAI Agents SDK {peers['openai-agents']} (chat completions)"] = agents_sdk
    if "pydantic-ai-slim" in peers:
        found[f"Pydantic AI {peers['pydantic-ai-slim']} (OpenAIChatModel)"] = pydantic_ai
    return found


def measure(work: Work, url: str, chunks: int, mode: str) -> float:
    """CPU seconds of one ``chunks``-long stream after a warm-up stream on the same pool."""

    async def timed() -> float:
        async with httpx.AsyncClient(timeout=60) as http:
            await work(http, f"{url}/10/{mode}/v1")
            started = time.process_time()
            await work(http, f"{url}/{chunks}/{mode}/v1")
            return time.process_time() - started

    return asyncio.run(timed())


def run(quick: bool = False) -> Report:
    sizes = {"burst": 20_000, "paced": 5_000} if not quick else {"burst": 500, "paced": 200}
    runs = 1 if quick else 5
    results: dict[str, dict[str, float]] = {}
    with server_process(SERVER) as port:
        url = f"http://127.0.0.1:{port}"
        for mode, chunks in sizes.items():
            cases = {
                name: partial(measure, work, url, chunks, mode) for name, work in clients().items()
            }
            samples = interleaved(cases, runs, warmups=0)
            results[mode] = {name: median(v) / chunks * 1e6 for name, v in samples.items()}
    return _report(results, sizes, runs)


def _report(results: dict[str, dict[str, float]], sizes: dict[str, int], runs: int) -> Report:
    names = list(results["burst"])
    floor, ours = names[0], names[1]
    rows = [
        (
            name,
            *(f"{results[mode][name]:.2f}" for mode in sizes),
            *(f"{results[mode][name] - results[mode][floor]:.2f}" for mode in sizes),
            *(f"{results[mode][name] / results[mode][ours]:.2f}×" for mode in sizes),
        )
        for name in names
    ]
    header = ["client", "burst µs/chunk", "paced µs/chunk", "burst above floor"]
    header += ["paced above floor", "burst ÷ ours", "paced ÷ ours"]
    markdown = "\n".join(
        [
            f"burst: {sizes['burst']:,} chunks, paced: {sizes['paced']:,} chunks (one per "
            f"read); client-process CPU µs per chunk, median of {runs} interleaved runs; the "
            'server runs in another process. "Above floor" subtracts the transport floor '
            "(the socket reads and HTTP framing every client pays).",
            "",
            table(header, rows),
        ]
    )
    burst, paced = results["burst"], results["paced"]
    checks = [
        Check(
            "2 wire",
            "agent_lab µs per chunk, burst (bytes → output message)",
            f"{burst[ours]:.2f}",
            f"≤ {TARGET_US:g}",
            burst[ours] <= TARGET_US,
        ),
        Check(
            "2 wire",
            "agent_lab µs per chunk, paced, above the transport floor",
            f"{paced[ours] - paced[floor]:.2f} (total {paced[ours]:.1f})",
            f"≤ {TARGET_US:g}",
            paced[ours] - paced[floor] <= TARGET_US,
        ),
    ]
    figures = {f"us_per_chunk[{m}][{n}]": v for m, row in results.items() for n, v in row.items()}
    return Report(
        "2. Wire path: client CPU per chunk",
        ".venv/bin/python -m bench --only wire",
        markdown,
        checks,
        figures,
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
