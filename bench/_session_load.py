"""One concurrency run of ``bench_sessions`` in a fresh interpreter, printed as JSON.

Run by ``bench_sessions`` as ``python -m bench._session_load VARIANT SESSIONS SPEED``
(add ``--no-gc`` to run with the collector disabled, to see what its pauses cost):

* ``floor``: per session, a bare asyncio task reads the in-process simulated model's
  chunks (the same timers and chunk parser) and puts one ``message_delta`` dict per
  delta on a recording queue; the consumer reads until the answer ends. No runtime.
* ``agent_lab``: per session, ``DebugRuntime(client)`` is built with its default tools
  (as a server does for each conversation), ``start_session`` runs one turn, the input
  is closed, the runtime is closed.

Both run with the collector's default settings (no ``gc.freeze``). A fresh process per
run keeps the heap, and so RSS and the collector's work, comparable. Reported: delays
(ms), CPU % of a core and CPU seconds, the collector's runs per generation (young,
middle, full) and the middle and full ones' pauses, RSS growth per session
(peak RSS minus RSS at the start, over the sessions) and the largest event-loop lag
(a 10 ms heartbeat timer of the benchmark's own).
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.simulator.provider import LatencyModel
from bench._common import request
from bench._load import InProcessSimClient, StampedClient, StampedOutput

PROMPT = "Session {n}: I would love to hear about the old town bridges and their history."


def rss_kib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 1024


class Heartbeat:
    """A 10 ms timer: the largest lag of its beats is the longest loop stall seen."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.max_ms, self.stalls = 0.0, 0
        self.due = self.loop.time() + 0.01
        self.handle = self.loop.call_at(self.due, self.beat)

    def beat(self) -> None:
        now = self.loop.time()
        lag = (now - self.due) * 1000
        self.max_ms = max(self.max_ms, lag)
        self.stalls += lag > 20
        self.due = now + 0.01
        self.handle = self.loop.call_at(self.due, self.beat)


class Collections:
    """Counts the collector's runs per generation, and times the middle and full ones."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self.middle_pauses_ms: list[float] = []
        self.counts = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        generation = info["generation"]
        if phase == "start":
            self.counts[generation] += 1
        if generation == 0:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        pauses = self.pauses_ms if generation == 2 else self.middle_pauses_ms
        pauses.append((time.perf_counter() - self._started) * 1000)


async def floor_session(n: int, model: InProcessSimClient, delays: list[float]) -> None:
    stamps: deque[float] = deque()
    output = StampedOutput(stamps, delays)
    client = StampedClient(model, stamps)
    run_request = request(user="")
    history = [*run_request.pre_messages]
    from agent_lab.domain.messages import ChatMessage

    history.append(ChatMessage(role="user", content=PROMPT.format(n=n)))

    async def relay() -> None:
        async for item in client.stream_chat(history, [], run_request.chat_agent):
            if item.kind == "message_delta":
                await output.put({"type": "message_delta", "content": item.content})
        await output.put({"type": "turn_completed"})

    task = asyncio.create_task(relay())
    while (await output.get())["type"] != "turn_completed":
        pass
    await task


async def runtime_session(n: int, model: InProcessSimClient, delays: list[float]) -> None:
    stamps: deque[float] = deque()
    queues = RuntimeQueues(output=StampedOutput(stamps, delays))
    runtime = DebugRuntime(StampedClient(model, stamps), queues=queues)
    io = runtime.start_session(request(user=""))
    try:
        await io.input.put(PROMPT.format(n=n))
        while (message := await io.output.get())["type"] != "turn_completed":
            if message["type"] == "error":
                raise RuntimeError(f"session {n} failed: {message}")
        await io.input.put(None)
        while (await io.output.get())["type"] != "done":
            pass
    finally:
        await runtime.aclose()


async def drive(variant: str, sessions: int, latency: LatencyModel | None) -> dict[str, Any]:
    model = InProcessSimClient(latency)
    session = floor_session if variant == "floor" else runtime_session
    delays: list[float] = []
    peak = [0.0]
    lag = Heartbeat()  # the same heartbeat for both variants

    async def one(n: int) -> None:
        await session(n, model, delays)
        peak[0] = max(peak[0], rss_kib())

    async def arrivals(group: asyncio.TaskGroup) -> None:
        """Each session starts when it is due, as a server's connections arrive: one
        task per live session, not 1,000 tasks made at once that sleep until due."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n in range(sessions):
            wait = start + n / sessions - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            group.create_task(one(n))

    async def sample_rss() -> None:
        while True:
            peak[0] = max(peak[0], rss_kib())
            await asyncio.sleep(0.05)

    await asyncio.sleep(0.05)
    collections = Collections()
    base = rss_kib()
    sampler = asyncio.create_task(sample_rss())
    gc.callbacks.append(collections)
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(arrivals(group))
    finally:
        gc.callbacks.remove(collections)
        sampler.cancel()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    lag.handle.cancel()
    return {
        "delays_ms": [d * 1000 for d in delays],
        "cpu_percent": cpu / wall * 100,
        "cpu_s": cpu,
        "wall_s": wall,
        "gc_pauses_ms": collections.pauses_ms,
        "middle_gc_pauses_ms": collections.middle_pauses_ms,
        "collections": collections.counts,
        "rss_kib_per_session": (peak[0] - base) / sessions,
        "loop_lag_max_ms": lag.max_ms,
        "stalls_over_20ms": lag.stalls,
    }


def main() -> None:
    variant, sessions, speed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if "--no-gc" in sys.argv[4:]:
        gc.disable()
    latency = LatencyModel(ttft_ms=300 / speed, tokens_per_second=40 * speed)
    DebugRuntime(StampedClient(InProcessSimClient(), deque()))  # imports and caches warm
    print(json.dumps(asyncio.run(drive(variant, sessions, latency))))


if __name__ == "__main__":
    main()
