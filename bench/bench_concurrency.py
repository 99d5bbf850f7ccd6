"""Benchmark 4: many concurrent sessions in one process at realistic token rates.

Run from the project root::

    .venv/bin/python -m bench --only concurrency
    .venv/bin/python -m bench.bench_concurrency [--quick] [--http-sessions 100 1000]

Sessions (``start_session``, no store, no tools) start spread over one second and run
two turns back to back against the simulated model (300 ms to first token, 40 tokens/s,
±10 % jitter, answers of about 20 chunks), so all of them stream at the same time.

* **in-process** (1,000 sessions): the simulated model's frames are paced by timers and
  parsed by the real chunk parser (``_load.InProcessSimClient``), no sockets. A second
  run with the garbage collector off is a diagnostic: it shows how much of the tail is
  collector pauses.
* **HTTP** (100 and 1,000 sessions): ``SimulatedProviderServer`` in another process,
  one shared ``OpenAICompatibleChatClient`` over one ``httpx`` pool with a connection
  per session. On this 2-core machine the server and the client share the cores.

Latency: the provider stamps every chunk with its emission time (``time.perf_counter``,
``CLOCK_MONOTONIC``, the same clock in every process); the runtime's output queue is a
subclass whose ``put`` records the delay since the chunk of each delta was emitted. CPU:
this process's CPU seconds over the run's wall seconds (100 % = one core). Memory, by
``tracemalloc`` (RSS growth is meaningless once earlier benchmarks in the same process
have grown the heap): per idle session (started, waiting for input) and per active
session (peak while all stream at once).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.simulator.provider import LatencyModel
from bench._common import Check, ListClient, Report, percentile, request, server_process, table
from bench._load import InProcessSimClient, StampedClient, StampedOutput

SERVER = Path(__file__).with_name("_sim_server.py")
TARGET_P99_MS = 5.0
TARGET_IDLE_KB = 50.0
QUICK_LATENCY = LatencyModel(ttft_ms=30, tokens_per_second=400)
PROMPT = "Session {n}, turn {t}: I would love to hear about the old town bridges and their history."
ClientFactory = Callable[[deque[float]], Any]


@dataclass
class LoadResult:
    label: str
    sessions: int
    turns: int
    delays_ms: list[float]
    cpu_percent: float
    wall_s: float
    failed: int
    gc_pauses_ms: list[float]
    """Full (generation 2) collections during the run."""

    def p(self, q: float) -> float:
        return percentile(self.delays_ms, q)


class FullCollections:
    """Records how long each generation-2 garbage collection takes."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._started) * 1000)


@dataclass(frozen=True)
class Load:
    """The shape of one load run."""

    sessions: int
    turns: int
    spread_s: float = 1.0
    """Session starts are spread evenly over this many seconds."""
    pre_messages: list[ChatMessage] = field(default_factory=list)


async def _session(
    n: int, make_client: ClientFactory, registry: ToolRegistry, load: Load, delays: list[float]
) -> bool:
    stamps: deque[float] = deque()
    queues = RuntimeQueues(output=StampedOutput(stamps, delays))
    runtime = DebugRuntime(make_client(stamps), registry=registry, queues=queues)
    io = runtime.start_session(request(user="", pre_messages=load.pre_messages))
    turns = load.turns
    ok = True
    try:
        for t in range(turns):
            await io.input.put(PROMPT.format(n=n, t=t))
            while (message := await io.output.get())["type"] != "turn_completed":
                if message["type"] == "error":
                    ok = False
                    break
        await io.input.put(None)
    finally:
        await runtime.aclose()
    return ok


async def drive(label: str, make_client: ClientFactory, load: Load) -> LoadResult:
    """Runs the sessions of ``load`` concurrently and measures them."""
    registry, sessions = ToolRegistry(), load.sessions
    delays: list[float] = []
    results: list[bool] = []
    gc.collect()
    collections = FullCollections()

    async def staggered(n: int) -> None:
        await asyncio.sleep(load.spread_s * n / sessions)
        results.append(await _session(n, make_client, registry, load, delays))

    gc.callbacks.append(collections)
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        async with asyncio.TaskGroup() as group:
            for n in range(sessions):
                group.create_task(staggered(n))
    finally:
        gc.callbacks.remove(collections)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return LoadResult(
        label,
        sessions,
        load.turns,
        [d * 1000 for d in delays],
        cpu / wall * 100,
        wall,
        results.count(False),
        collections.pauses_ms,
    )


async def idle_memory(sessions: int) -> float:
    """``tracemalloc`` bytes per session started and waiting for input."""
    registry, client, run_request = ToolRegistry(), ListClient([]), request(user="")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        runtimes = [DebugRuntime(client, registry=registry) for _ in range(sessions)]
        for runtime in runtimes:
            runtime.start_session(run_request)
        for runtime in runtimes:  # every session has announced itself and waits for input
            while (await runtime.queues.output.get())["type"] != "session_started":
                pass
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    for runtime in runtimes:
        await runtime.aclose()
    return (after - before) / sessions


async def over_http(base_url: str, load: Load) -> LoadResult:
    limits = httpx.Limits(max_connections=load.sessions, max_keepalive_connections=load.sessions)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        client = OpenAICompatibleChatClient(base_url, http_client=http)
        warm = await drive("warm-up", lambda stamps: StampedClient(client, stamps), Load(1, 1))
        assert not warm.failed, "the simulated provider did not answer"
        return await drive(
            "HTTP, shared pool, provider in another process",
            lambda stamps: StampedClient(client, stamps),
            load,
        )


def in_process(
    load: Load,
    *,
    collect: bool = True,
    freeze: bool = False,
    latency: LatencyModel | None = None,
) -> LoadResult:
    """The in-process variant.

    ``freeze=True`` moves the start-up heap out of the collector's reach first
    (``gc.freeze()``, as ``agent-lab serve`` does); ``collect=False`` disables the
    garbage collector altogether (a diagnostic only).
    """
    model = InProcessSimClient(latency)
    label = "in-process"
    if freeze:
        label += ", start-up heap frozen (gc.freeze, as agent-lab serve does)"
    if not collect:
        label += ", garbage collector off (diagnostic)"
    if freeze:
        gc.collect()
        gc.freeze()
    if not collect:
        gc.disable()
    try:
        return asyncio.run(drive(label, lambda stamps: StampedClient(model, stamps), load))
    finally:
        gc.enable()
        gc.unfreeze()


async def active_memory(sessions: int) -> float:
    """Peak ``tracemalloc`` bytes per session while all stream at once (fast model)."""
    model = InProcessSimClient(QUICK_LATENCY)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await drive("memory", lambda stamps: StampedClient(model, stamps), Load(sessions, 1, 0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - before) / sessions


def median_run(runs: list[LoadResult]) -> LoadResult:
    """The run whose p99 is the median: the tail is what varies with the neighbours."""
    return sorted(runs, key=lambda r: r.p(0.99))[len(runs) // 2]


def run(quick: bool = False, http_sessions: list[int] | None = None) -> Report:
    """Quick mode: 20 sessions, one turn, a 10× faster model (30 ms TTFT, 400 tokens/s)."""
    load = Load(20, 1, spread_s=0.1) if quick else Load(1000, 2)
    latency = QUICK_LATENCY if quick else None
    repeats = 1 if quick else 3
    http_sizes = http_sessions or ([10] if quick else [100, 1000])
    memory = {
        "idle_traced": asyncio.run(idle_memory(load.sessions)),
        "active_traced": asyncio.run(active_memory(load.sessions)),
    }
    variants = [(True, False), (True, True), (False, False)]
    results = [
        median_run(
            [
                in_process(load, collect=collect, freeze=freeze, latency=latency)
                for _ in range(repeats)
            ]
        )
        for collect, freeze in variants
    ]
    server_args = ["30", "400"] if quick else []
    with server_process(SERVER, *server_args) as base_url:
        for n in http_sizes:
            http_load = Load(n, load.turns, load.spread_s)
            times = repeats if n <= 100 else 1  # 1,000 HTTP sessions take ~40 s here
            results.append(
                median_run([asyncio.run(over_http(base_url, http_load)) for _ in range(times)])
            )
    return _report(results, {k: v / 1024 for k, v in memory.items()}, (load.sessions, repeats))


def _report(loads: list[LoadResult], memory_kb: dict[str, float], shape: tuple[int, int]) -> Report:
    sessions, repeats = shape
    header = ["variant", "sessions × turns", "deltas", "p50 ms", "p99 ms", "max ms"]
    header += ["CPU % of a core", "wall s", "full GCs (max ms)", "failed"]
    rows = [
        (
            r.label,
            f"{r.sessions} × {r.turns}",
            len(r.delays_ms),
            f"{r.p(0.5):.2f}",
            f"{r.p(0.99):.2f}",
            f"{max(r.delays_ms, default=0):.1f}",
            f"{r.cpu_percent:.0f}",
            f"{r.wall_s:.1f}",
            f"{len(r.gc_pauses_ms)} ({max(r.gc_pauses_ms, default=0):.0f})",
            r.failed,
        )
        for r in loads
    ]
    markdown = "\n".join(
        [
            "Delay from the provider emitting a chunk to the runtime putting its delta on "
            "the output queue; CPU is this process only (the HTTP server runs in another). "
            f"Each row is the run with the median p99 of {repeats} (one run for 1,000 HTTP "
            "sessions).",
            "",
            table(header, rows),
            "",
            f"Memory per session ({sessions} sessions, `tracemalloc`): "
            f"**{memory_kb['idle_traced']:.1f} KB** idle (started, waiting for input), "
            f"{memory_kb['active_traced']:.1f} KB at the peak while all stream at once "
            "(in-process model).",
        ]
    )
    checks = [
        Check(
            "4 concurrency",
            f"p99 delay, {r.label} ({r.sessions} sessions)",
            f"{r.p(0.99):.2f} ms",
            f"≤ {TARGET_P99_MS:g} ms",
            r.p(0.99) <= TARGET_P99_MS and not r.failed,
        )
        for r in loads
        if "diagnostic" not in r.label
    ]
    idle = memory_kb["idle_traced"]
    checks.append(
        Check(
            "4 concurrency",
            "memory per idle session (tracemalloc)",
            f"{idle:.1f} KB",
            f"≤ {TARGET_IDLE_KB:g} KB",
            idle <= TARGET_IDLE_KB,
        )
    )
    figures: dict[str, float] = {f"{k}_kb": v for k, v in memory_kb.items()}
    for r in loads:
        figures |= {f"p50_ms[{r.label}]": r.p(0.5), f"p99_ms[{r.label}]": r.p(0.99)}
        figures |= {f"cpu_percent[{r.label}]": r.cpu_percent, f"failed[{r.label}]": r.failed}
    return Report(
        "4. Concurrency: sessions at realistic token rates",
        ".venv/bin/python -m bench --only concurrency",
        markdown,
        checks,
        figures,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--http-sessions", type=int, nargs="*", default=None)
    args = parser.parse_args()
    print(run(args.quick, args.http_sessions).markdown)
