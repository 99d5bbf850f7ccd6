"""Benchmark 5: how per-delta, per-turn and concurrent costs grow with the conversation.

Run from the project root::

    .venv/bin/python -m bench --only scaling
    .venv/bin/python -m bench.bench_scaling [--quick]

* **Per delta vs history.** ``DebugRuntime.run`` with 10 → 1,000 ``pre_messages``; the
  marginal CPU per delta is the slope between a short and a long answer
  ``(cpu(long) - cpu(short)) / (long - short)``, so per-turn work cancels out. It
  should stay flat: no per-delta work may depend on the history.
* **Per turn vs history.** Session turns of one delta (as in benchmark 3) after 10 →
  1,000 prior messages: ``pre_messages`` without a store, restored history with
  ``SQLiteSessionStore``. Growth may be at most linear.
* **Per turn vs batch size.** One round with 1 → 32 trivial tool calls, then a
  one-delta follow-up round, in both tool modes, without and with the store.
* **Concurrency vs history.** The in-process load of benchmark 4 with 10 and 1,000
  ``pre_messages`` (fewer sessions, to keep the run short).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from bench import bench_concurrency, bench_turn
from bench._common import (
    ListClient,
    Report,
    cpu_seconds,
    deltas,
    drain,
    history,
    median,
    request,
    trivial_registry,
)
from bench._scaling_report import Scaling, report

FLAT_LIMIT = 1.5
"""Per-delta cost at the longest history may be at most this multiple of the shortest."""


def per_delta_us(sizes: list[int], short: int, long: int, runs: int) -> dict[int, float]:
    """Marginal CPU µs per delta for each history size."""
    registry = ToolRegistry()

    def one_run(run_request: DebugRunRequest, count: int) -> float:
        client = ListClient(deltas(count))
        return cpu_seconds(lambda: drain(DebugRuntime(client, registry=registry).run(run_request)))

    out = {}
    for size in sizes:
        run_request = request(pre_messages=history(size))
        slopes = [
            (one_run(run_request, long) - one_run(run_request, short)) / (long - short) * 1e6
            for _ in range(runs)
        ]
        out[size] = median(slopes)
    return out


def turn_ms_plain(size: int, turns: int, runs: int) -> float:
    run_request = request(user="", pre_messages=history(size))
    return median(
        [
            asyncio.run(
                bench_turn.session_turns(bench_turn.runtime_for(None), run_request, turns)
            ).cpu_ms
            for _ in range(runs)
        ]
    )


def turn_ms_restored(directory: Path, size: int, turns: int, runs: int) -> float:
    samples = []
    for run_index in range(runs):
        path = directory / f"restored-{size}-{run_index}.sqlite3"
        with SQLiteSessionStore(path) as store:
            store.ensure_session("bench", "restored", {})
            store.start_turn("bench", 1, "earlier")
            store.append_messages("bench", 1, history(size))
            store.complete_turn("bench", 1)
            cost = asyncio.run(
                bench_turn.session_turns(
                    bench_turn.runtime_for(store), request(user="", session_id="bench"), turns
                )
            )
        samples.append(cost.cpu_ms)
    return median(samples)


class BatchClient:
    """Round 1 of every turn asks for ``size`` tool calls (fresh ids), round 2 answers."""

    def __init__(self, size: int, dual: bool) -> None:
        self.size, self.dual, self.calls = size, dual, 0

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        self.calls += 1
        yield StreamItem.message_delta("On it.")
        if self.calls % 2 == 0:
            return
        wrap = StreamItem.text_event if self.dual else StreamItem.provider_tool_call
        for n in range(self.size):
            yield wrap(ToolCallEvent(id=f"call_{self.calls}_{n}", name="noop_0"))


def turn_ms_batch(directory: Path | None, size: int, mode: str, turns: int, runs: int) -> float:
    """CPU ms of a one-shot ``run()`` whose first round asks for ``size`` tool calls.

    One-shot runs start from an empty history each time, so the batch is all that grows.
    """
    registry = trivial_registry(1)
    store = SQLiteSessionStore(directory / f"batch-{mode}-{size}.sqlite3") if directory else None

    async def turn(index: int) -> None:
        runtime = DebugRuntime(
            BatchClient(size, mode == "dual_agent"), registry=registry, session_store=store
        )
        session = f"bench-{index}" if store is not None else None
        await drain(runtime.run(request(tools=["noop_0"], mode=mode, session_id=session)))

    counter = iter(range(1_000_000))

    async def turns_in_a_row() -> None:
        for _ in range(turns):
            await turn(next(counter))

    try:
        cpu_seconds(turns_in_a_row)  # warm-up
        samples = [cpu_seconds(turns_in_a_row) / turns * 1000 for _ in range(runs)]
    finally:
        if store is not None:
            store.close()
    return median(samples)


def run(quick: bool = False) -> Report:
    sizes = [10, 100] if quick else [10, 100, 1000]
    batches = [1, 4] if quick else [1, 8, 32]
    runs, turns = (1, 3) if quick else (5, 20)
    short, long = (100, 600) if quick else (1_000, 11_000)
    delta = per_delta_us(sizes, short, long, runs)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        per_turn = {
            "no store, pre_messages": {s: turn_ms_plain(s, turns, runs) for s in sizes},
            "SQLite, restored history": {
                s: turn_ms_restored(directory, s, turns, runs) for s in sizes
            },
        }
        per_batch = {
            f"{mode}, {'SQLite' if store else 'no store'}": {
                b: turn_ms_batch(directory if store else None, b, mode, turns, runs)
                for b in batches
            }
            for mode in ("chat_agent_tools", "dual_agent")
            for store in (False, True)
        }
    sessions, load_turns, spread = (50, 1, 0.1) if quick else (250, 2, 1.0)
    latency = bench_concurrency.QUICK_LATENCY if quick else None
    loads = {
        size: bench_concurrency.in_process(
            bench_concurrency.Load(sessions, load_turns, spread, history(size)), latency=latency
        )
        for size in (sizes[0], sizes[-1])
    }
    results = Scaling(delta, per_turn, per_batch, loads, (short, long, runs, turns))
    return report(results, FLAT_LIMIT)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
