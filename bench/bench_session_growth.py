"""Benchmark: how a long session's store grows, in size and in time per turn.

Run from the project root::

    .venv/bin/python bench/bench_session_growth.py --turns 500
    .venv/bin/python -m bench --only session_growth

The real ``DebugRuntime`` drives one session of ``--turns`` turns per tool mode on an
SQLite file against a scripted model; each turn makes one tool call and two chat
rounds, so every turn's request audits carry the whole conversation so far.
Reported:

* the database file size after close, next to the size the audit details would take
  if stored verbatim (the sum of their JSON, as the store stored them before it kept
  each message once); target < 10 MB for 500 turns;
* the time per turn (process CPU time, all threads, and wall time) of the last 50 turns
  against the first 50 after the warm-up turn 1 (which opens the session); target: at
  most 1.5×;
* a second session whose second turn returns one ``--large-mb`` tool result: how much
  that one result adds to the file (the audit copy is capped; the transcript and the
  journal keep the full result).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_lab.application.contracts import (  # noqa: E402
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.runtime import DebugRuntime  # noqa: E402
from agent_lab.application.tools import ToolDefinition, ToolRegistry  # noqa: E402
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage  # noqa: E402
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore  # noqa: E402
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call  # noqa: E402
from bench._common import Check, Report  # noqa: E402

USAGE = TokenUsage(prompt_tokens=812, completion_tokens=64, total_tokens=876)
WINDOW = 50
SIZE_TARGET_MB = 10.0
RATIO_TARGET = 1.5


class ThreadTimedStore:
    """Delegates to the store and adds up the CPU time of its calls (worker threads).

    It offers the store's ``atomic_writes()`` too (the runtime groups a write with its
    audits in one transaction through it), timed as a whole, calls inside included."""

    def __init__(self, inner: SQLiteSessionStore) -> None:
        self.inner = inner
        self.cpu_seconds = 0.0
        self._grouped = threading.local()

    @contextlib.contextmanager
    def atomic_writes(self) -> Iterator[None]:
        started = time.thread_time()
        self._grouped.active = True
        try:
            with self.inner.atomic_writes():
                yield
        finally:
            self._grouped.active = False
            self.cpu_seconds += time.thread_time() - started

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name.startswith("_") or not callable(target):
            return target

        def timed(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._grouped, "active", False):
                return target(*args, **kwargs)  # counted with its group
            started = time.thread_time()
            try:
                return target(*args, **kwargs)
            finally:
                self.cpu_seconds += time.thread_time() - started

        return timed


@dataclass
class Growth:
    turns: int
    db_bytes: int = 0
    verbatim_audit_bytes: int = 0
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    store_ms: list[float] = field(default_factory=list)

    def window(self) -> int:
        return min(WINDOW, (self.turns - 1) // 2) or 1

    def first(self, values: list[float]) -> float:
        """The mean of the first window, after the warm-up turn (session open)."""
        return statistics.mean(values[1 : 1 + self.window()])

    def last(self, values: list[float]) -> float:
        return statistics.mean(values[-self.window() :])

    def ratio(self, values: list[float]) -> float:
        return self.last(values) / self.first(values)


def _registry(large_chars: int) -> ToolRegistry:
    def lookup(event: Any) -> dict[str, Any]:
        big = large_chars if event.id == "c2" else 0
        return {"found": True, "q": event.arguments.get("q", ""), "page": "x" * big}

    tool = ToolDefinition(
        name="lookup",
        description="Looks a thing up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=lookup,
        argument_resolver=lambda event, context: {"q": "standup"},
    )
    return ToolRegistry([tool])


def _rounds(mode: ToolInvocationMode, turns: int) -> list[Sequence[StreamItem] | BaseException]:
    rounds: list[Sequence[StreamItem] | BaseException] = []
    for turn in range(1, turns + 1):
        if mode == "dual_agent":
            rounds.append([*text("Sure, checking.", usage=USAGE), text_event(f"c{turn}", "lookup")])
        else:
            call = tool_call(f"c{turn}", "lookup", q=f"standup {turn}")
            rounds.append([call, *text(usage=USAGE)])
        rounds.append(text(f"Turn {turn}: it is booked for nine, as asked.", usage=USAGE))
    return rounds


async def _until_turn_completed(queues: Any) -> None:
    while True:
        output = await asyncio.wait_for(queues.output.get(), timeout=60)
        if output["type"] == "error":
            raise RuntimeError(f"the benchmark turn failed: {output}")
        if output["type"] == "turn_completed":
            return


async def _drive(
    path: Path, mode: ToolInvocationMode, turns: int, large_chars: int, growth: Growth
) -> None:
    store = ThreadTimedStore(SQLiteSessionStore(path))
    client = ScriptedChatClient(_rounds(mode, turns))
    runtime = DebugRuntime(client, registry=_registry(large_chars), session_store=store)
    request = DebugRunRequest(
        session_id="growth",
        user_message="Please book the standup, turn 1.",
        chat_agent=AgentParams(model="bench-model"),
        event_agent=EventAgentParams(enabled_tools=["lookup"], max_event_loops=1),
        tool_invocation_mode=mode,
    )
    started, cpu, in_store = time.perf_counter(), time.process_time(), 0.0
    queues = runtime.start_session(request)
    for turn in range(1, turns + 1):
        if turn > 1:
            await queues.input.put(ChatMessage(role="user", content=f"And turn {turn}?"))
        await _until_turn_completed(queues)
        now, now_cpu = time.perf_counter(), time.process_time()
        growth.wall_ms.append((now - started) * 1000)
        growth.cpu_ms.append((now_cpu - cpu) * 1000)
        growth.store_ms.append((store.cpu_seconds - in_store) * 1000)
        started, cpu, in_store = now, now_cpu, store.cpu_seconds
    await runtime.aclose()
    audits = store.list_audit_logs("growth")
    growth.verbatim_audit_bytes = sum(len(json.dumps(a["details"]).encode()) for a in audits)
    store.inner.close()  # checkpoints the WAL into the database file


def measure(directory: Path, mode: ToolInvocationMode, turns: int, large_chars: int = 0) -> Growth:
    growth = Growth(turns)
    path = directory / f"growth-{len(list(directory.iterdir()))}.sqlite3"
    asyncio.run(_drive(path, mode, turns, large_chars, growth))
    growth.db_bytes = path.stat().st_size
    return growth


def _mb(value: float) -> str:
    return f"{value / 1e6:,.2f} MB"


MODES: tuple[ToolInvocationMode, ...] = ("chat_agent_tools", "dual_agent")


def _rows(runs: dict[ToolInvocationMode, Growth]) -> list[str]:
    def row(label: str, cell: Callable[[Growth], str]) -> str:
        return f"| {label} | " + " | ".join(cell(g) for g in runs.values()) + " |"

    def trend(values: Callable[[Growth], list[float]]) -> Callable[[Growth], str]:
        return lambda g: (
            f"{g.first(values(g)):.2f} → {g.last(values(g)):.2f} (×{g.ratio(values(g)):.2f})"
        )

    window = next(iter(runs.values())).window()
    return [
        "| figure | " + " | ".join(f"`{mode}`" for mode in runs) + " |",
        "|---|" + "---:|" * len(runs),
        row("database file after close", lambda g: _mb(g.db_bytes)),
        row("audit details if stored verbatim (JSON)", lambda g: _mb(g.verbatim_audit_bytes)),
        row(f"CPU ms per turn, first {window} → last {window}", trend(lambda g: g.cpu_ms)),
        row("of which in store calls (CPU)", trend(lambda g: g.store_ms)),
        row(f"wall ms per turn, first {window} → last {window}", trend(lambda g: g.wall_ms)),
    ]


def report(turns: int, large_mb: float, quick: bool) -> Report:
    short = max(4, min(turns, 50))
    with tempfile.TemporaryDirectory() as tmp:
        runs = {mode: measure(Path(tmp), mode, turns) for mode in MODES}
        without = measure(Path(tmp), "chat_agent_tools", short)
        large = measure(Path(tmp), "chat_agent_tools", short, int(large_mb * 1e6))
    added = large.db_bytes - without.db_bytes
    lines = [
        f"`bench/bench_session_growth.py --turns {turns}`: one session per mode through the "
        "real runtime on an SQLite file (one tool call, two chat rounds per turn).",
        "",
        *_rows(runs),
        "",
        f"A {short}-turn `chat_agent_tools` session: {_mb(without.db_bytes)}; with one "
        f"{large_mb:g} MB tool result in turn 2: {_mb(large.db_bytes)} (+{_mb(added)}). The "
        "result is kept in full in the transcript and in the tool journal; the audits keep "
        "a capped copy (a marker with its size and SHA-256), and later request audits refer "
        "to the stored message instead of repeating it.",
    ]
    checks = []
    for mode, growth in runs.items():
        ratio = growth.ratio(growth.cpu_ms)
        size, window = _mb(growth.db_bytes), growth.window()
        size_ok = None if quick else growth.db_bytes < SIZE_TARGET_MB * 1e6
        ratio_ok = None if quick else ratio <= RATIO_TARGET
        checks += [
            Check(
                "session_growth",
                f"{mode}: db size, {turns} turns",
                size,
                f"< {SIZE_TARGET_MB:g} MB",
                size_ok,
            ),
            Check(
                "session_growth",
                f"{mode}: CPU per turn, last {window} ÷ first {window}",
                f"×{ratio:.2f}",
                f"≤ ×{RATIO_TARGET:g}",
                ratio_ok,
            ),
        ]
    figures = {"large_result_added_bytes": float(added)}
    for mode, growth in runs.items():
        figures[f"db_bytes[{mode}]"] = float(growth.db_bytes)
        figures[f"verbatim_audit_bytes[{mode}]"] = float(growth.verbatim_audit_bytes)
        figures[f"cpu_ratio[{mode}]"] = growth.ratio(growth.cpu_ms)
        figures[f"store_cpu_ratio[{mode}]"] = growth.ratio(growth.store_ms)
    title = "Session growth: a long session's file size and time per turn"
    command = ".venv/bin/python -m bench --only session_growth"
    return Report(title, command, "\n".join(lines) + "\n", checks, figures)


def run(quick: bool = False) -> Report:
    """The suite's entry point: 500 turns and a 50 MB result; 6 turns and 2 MB if quick."""
    return report(6, 2.0, quick=True) if quick else report(500, 50.0, quick=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure how a long session's store grows.")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--large-mb", type=float, default=50.0)
    args = parser.parse_args(argv)
    result = report(args.turns, args.large_mb, quick=False)
    print(result.markdown)
    for check in result.checks:
        print(f"{check.metric}: {check.value} (target {check.target}) met={check.met}")


if __name__ == "__main__":
    main()
