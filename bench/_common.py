"""Shared pieces of the benchmark suite: timing, fixtures, the floor, and report types.

Every benchmark module exposes ``run(quick: bool) -> Report``; ``bench/run_all.py``
collects the reports into ``bench/RESULTS.md``. Times are process CPU time
(``time.process_time``, all threads) unless a row says "wall": the machine is shared,
so wall time mostly measures the neighbours.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.messages import ChatMessage, StreamItem

MODEL = "bench-model"


@dataclass(frozen=True)
class Check:
    """One target of the summary table."""

    benchmark: str
    metric: str
    value: str
    target: str
    met: bool | None
    """``None`` for figures reported without a target."""


@dataclass
class Report:
    """What one benchmark hands the suite runner."""

    title: str
    command: str
    markdown: str
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)
    """Raw numbers by name, for the smoke test and for scripts."""


def fresh_process_json(args: Sequence[str], timeout: float) -> Any:
    """Run ``python *args`` in a fresh interpreter from the project root and return the
    JSON its last line of output prints (a benchmark's child process reports so)."""
    completed = subprocess.run(
        [sys.executable, *args],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cpu_seconds(coro_factory: Callable[[], Awaitable[Any]]) -> float:
    """Process CPU seconds of one ``asyncio.run`` of the coroutine (loop setup excluded)."""

    async def timed() -> float:
        gc.collect()
        started = time.process_time()
        await coro_factory()
        return time.process_time() - started

    return asyncio.run(timed())


def interleaved(
    cases: Mapping[str, Callable[[], float]], runs: int, warmups: int = 1
) -> dict[str, list[float]]:
    """Runs every case ``runs`` times, round-robin, so all share the machine's moods."""
    for case in cases.values():
        for _ in range(warmups):
            case()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, case in cases.items():
            samples[name].append(case())
    return samples


def verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "–"}[met]


def table(header: Sequence[str], rows: Sequence[Sequence[object]], *, left: int = 1) -> str:
    """A markdown table; the first ``left`` columns are left-aligned, the rest right."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * left + "---:|" * (len(header) - left),
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


class ListClient:
    """A ``ChatClient`` that replays prebuilt rounds of items; costs next to nothing."""

    def __init__(self, *rounds: Sequence[StreamItem], repeat_last: bool = True) -> None:
        self._rounds = list(rounds)
        self._repeat_last = repeat_last
        self.calls = 0

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        index = min(self.calls, len(self._rounds) - 1) if self._repeat_last else self.calls
        self.calls += 1
        for item in self._rounds[index]:
            yield item


def deltas(count: int, text: str = " word") -> list[StreamItem]:
    return [StreamItem.message_delta(text)] * count


def history(count: int) -> list[ChatMessage]:
    """``count`` alternating user/assistant messages of ordinary length."""
    return [
        ChatMessage(
            role="user" if n % 2 == 0 else "assistant",
            content=f"Message {n}: could you check the calendar for the standup next week?",
        )
        for n in range(count)
    ]


def request(
    *,
    user: str = "Hello there.",
    pre_messages: list[ChatMessage] | None = None,
    tools: list[str] | None = None,
    mode: str = "dual_agent",
    session_id: str | None = None,
) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=user,
        system_prompts=["You are a helpful assistant."],
        pre_messages=pre_messages or [],
        chat_agent=AgentParams(model=MODEL),
        event_agent=EventAgentParams(enabled_tools=tools or [], max_event_loops=1),
        tool_invocation_mode=cast(ToolInvocationMode, mode),
    )


def trivial_registry(count: int) -> ToolRegistry:
    """``count`` tools whose handler returns a constant (no resolver needed: no arguments)."""
    return ToolRegistry(
        ToolDefinition(
            name=f"noop_{n}",
            description="Does nothing.",
            parameters={"type": "object", "properties": {}},
            handler=lambda event: {"ok": True},
            argument_resolver=lambda event, context: {},
        )
        for n in range(count)
    )


async def queue_relay(items: int) -> None:
    """The floor: a producer task puts one dict per delta, the caller gets them."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    contents = [" word"] * items

    async def produce() -> None:
        for content in contents:
            await queue.put({"type": "message_delta", "content": content})
        await queue.put({"type": "done"})

    task = asyncio.create_task(produce())
    while (await queue.get())["type"] != "done":
        pass
    await task


async def drain(stream: AsyncIterator[object]) -> int:
    count = 0
    async for _ in stream:
        count += 1
    return count


@contextlib.contextmanager
def server_process(script: Path, *args: str) -> Iterator[str]:
    """Runs ``script`` in its own Python process; yields the first line it prints.

    The server stops when its stdin closes; it is killed if it does not within 5 s.
    """
    with server_process_and_pid(script, *args) as (line, _):
        yield line


@contextlib.contextmanager
def server_process_and_pid(script: Path, *args: str) -> Iterator[tuple[str, int]]:
    """``server_process``, also yielding the server's pid (to read its CPU time)."""
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"{script.name} did not start")
        yield line, process.pid
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
