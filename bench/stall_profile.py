"""What the event loop's stalls at 1,000 sessions are made of: collections, work, or waiting.

Runs one ``bench._session_load`` run (the same paced in-process sessions) with a 5 ms
heartbeat on the loop and a watchdog thread beside it. For every stall (the heartbeat
more than 30 ms late) it reports the stall's wall time, the CPU the loop's thread used
meanwhile (the rest is time the OS gave to other processes: a loaded machine) and the
collections that ran inside it (``gc.callbacks``, every generation)::

    .venv/bin/python -m bench.stall_profile [agent_lab|floor] [SESSIONS]

A stall with little CPU was the machine, one whose CPU is mostly collection was the
collector, and the rest was work queued on the loop (every session's ready callbacks run
in one pass of the loop before its timers).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agent_lab.infrastructure.simulator.provider import LatencyModel
from bench import _session_load

LATE_S = 0.03
BEAT_S = 0.005


@dataclass
class Stall:
    started: float
    ended: float = 0.0
    cpu_s: float = 0.0


@dataclass
class Watch:
    """The heartbeat's last beat, the collections seen, and the stalls found."""

    beat: float = field(default_factory=time.perf_counter)
    collections: list[tuple[int, float, float]] = field(default_factory=list)
    """``(generation, start, seconds)`` of each collection."""
    stalls: list[Stall] = field(default_factory=list)
    _gc_started: float = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            elapsed = time.perf_counter() - self._gc_started
            self.collections.append((info["generation"], self._gc_started, elapsed))

    def gc_ms_within(self, stall: Stall) -> float:
        spans = (s for _, start, s in self.collections if stall.started <= start <= stall.ended)
        return sum(spans) * 1000

    def watch(self, loop_thread: int, stop: threading.Event) -> None:
        """The watchdog: notes each stall's span and the loop thread's CPU inside it."""
        clock = time.pthread_getcpuclockid(loop_thread)
        current: Stall | None = None
        cpu_at = 0.0
        while not stop.is_set():
            time.sleep(0.002)
            beat = self.beat
            if current is None and time.perf_counter() - beat > LATE_S:
                current, cpu_at = Stall(beat), time.clock_gettime(clock)
            elif current is not None and beat != current.started:
                current.ended, current.cpu_s = beat, time.clock_gettime(clock) - cpu_at
                self.stalls.append(current)
                current = None


async def _run(variant: str, sessions: int, watch: Watch) -> dict[str, Any]:
    loop = asyncio.get_running_loop()

    def tick() -> None:
        watch.beat = time.perf_counter()
        loop.call_later(BEAT_S, tick)

    tick()
    latency = LatencyModel(ttft_ms=300, tokens_per_second=40)
    return await _session_load.drive(variant, sessions, latency)


def main() -> None:
    variant = sys.argv[1] if len(sys.argv) > 1 else "agent_lab"
    sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    watch = Watch()
    stop = threading.Event()
    watchdog = threading.Thread(target=watch.watch, args=(threading.get_ident(), stop))
    gc.callbacks.append(watch.on_gc)
    watchdog.start()
    try:
        result = asyncio.run(_run(variant, sessions, watch))
    finally:
        stop.set()
        watchdog.join()
        gc.callbacks.remove(watch.on_gc)
    full = [round(s * 1000, 1) for g, _, s in watch.collections if g == 2]
    young = [s * 1000 for g, _, s in watch.collections if g < 2]
    print(f"{variant}, {sessions} sessions: largest loop lag {result['loop_lag_max_ms']:.0f} ms,")
    print(f"  CPU {result['cpu_percent']:.0f} %, full collections (ms) {full},")
    print(f"  young collections: {len(young)}, longest {max(young, default=0):.1f} ms")
    total = sum(s.ended - s.started for s in watch.stalls) * 1000
    in_gc = sum(watch.gc_ms_within(s) for s in watch.stalls)
    cpu = sum(s.cpu_s for s in watch.stalls) * 1000
    print(
        f"stalls over {LATE_S * 1000:.0f} ms: {len(watch.stalls)}, {total:.0f} ms in all; "
        f"loop thread CPU after the first {LATE_S * 1000:.0f} ms of each: {cpu:.0f} ms, "
        f"of which collections {in_gc:.0f} ms"
    )
    print("| stall ms | loop CPU ms (after 30 ms) | collections inside ms |")
    print("|---:|---:|---:|")
    for stall in sorted(watch.stalls, key=lambda s: s.started - s.ended)[:10]:
        wall = (stall.ended - stall.started) * 1000
        print(f"| {wall:.0f} | {stall.cpu_s * 1000:.0f} | {watch.gc_ms_within(stall):.0f} |")


if __name__ == "__main__":
    main()
