"""Benchmark: the store writes one persisted turn makes.

Run from the project root::

    .venv/bin/python bench/bench_store.py --turns 200 --record

``--record`` writes its section of ``bench/RESULTS.md`` (replacing the previous one;
``python -m bench`` rewrites the whole file with every benchmark, this one included);
without it the report is only printed. ``--dir`` chooses where the store files
live (default: a temporary directory; the file system matters for ``FULL``).

The real ``DebugRuntime`` drives a session of ``--turns`` turns against a scripted model;
each turn makes one tool call and two chat rounds. The store is wrapped in a proxy that
times every call the runtime makes (in the runtime's worker thread), so the write
sequence measured is exactly the runtime's: a write the store makes on the event loop
(``write_now``, SQLite ``NORMAL`` and in-memory) is timed there, and each such write's
whole time is also a hold of the loop (the "loop holds" table: the largest is the
longest the store kept the loop from anything else); writes the store declines there
go to the worker thread and are timed in it. The first turn (session open, warm-up) is
not counted. Reported: per-call latency (median / p95) and calls per turn, the store
time per turn, and for SQLite the rows inserted and bytes written per turn
(``wchar`` from ``/proc/self/io``: bytes handed to ``write``/``pwrite`` by the process,
checkpoints included; and the database file size after close divided by the turns).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import platform
import resource
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import NotNow, SessionStore
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore, Synchronous
from agent_lab.testing import InMemorySessionStore, ScriptedChatClient, text, text_event, tool_call

RESULTS = Path(__file__).with_name("RESULTS.md")
TABLES = (
    "sessions",
    "turns",
    "messages",
    "audit_logs",
    "call_metrics",
    "tool_batches",
    "tool_calls",
    "session_claims",
    "audit_blobs",
    "audit_lists",
)
USAGE = TokenUsage(prompt_tokens=812, completion_tokens=64, total_tokens=876)


GROUP = "atomic_writes (begin + commit)"
NOW = "write_now (begin + commit, on the loop)"


class TimedStore:
    """Delegates to a store and records how long each public call takes.

    When the store groups writes (``atomic_writes()``, which the runtime uses to commit
    a write with its audits), the group's own cost (its ``BEGIN`` and ``COMMIT``: the
    group's time less the calls inside it) is recorded as ``GROUP``."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.calls: dict[str, list[float]] = defaultdict(list)
        self.transactions = 0
        """Store transactions: one per group, one per call outside a group."""
        self._inside: list[float] | None = None
        self.holds: list[float] = []
        """Each ``write_now``'s whole time on the loop (declined ones too)."""
        self.hold_cpu: list[float] = []
        """The same holds in CPU time of the loop's thread (the rest is time the OS
        gave other threads: preemption, or a sleep in the store)."""
        self.collected: list[bool] = []
        """Whether a garbage collection ran inside each hold (its pause is not the store's)."""
        self.slept = 0
        """Holds in which the loop's thread slept (a voluntary context switch: it
        waited for I/O or a lock), which the store must never do."""
        self.declined = 0

    def forget_warm_up(self) -> None:
        """Drops what the warm-up turn recorded: the figures are of the measured turns."""
        self.calls.clear()
        self.holds.clear()
        self.hold_cpu.clear()
        self.collected.clear()
        self.declined = self.slept = 0

    def write_now(self, work: Callable[[], Any]) -> Any:
        inner = getattr(self.inner, "write_now", None)
        if inner is None:
            raise NotNow
        switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        collections = _collections()
        cpu, started, self._inside = time.thread_time(), time.perf_counter(), []
        try:
            result = inner(work)
        except NotNow:
            self.declined += 1
            raise
        finally:
            inside, self._inside = self._inside, None
            took = time.perf_counter() - started
            self.holds.append(took)
            self.hold_cpu.append(time.thread_time() - cpu)
            self.collected.append(_collections() != collections)
            self.slept += resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw > switches
        self.transactions += 1
        self.calls[NOW].append(took - sum(inside))
        return result

    @contextlib.contextmanager
    def atomic_writes(self) -> Iterator[None]:
        started, self._inside = time.perf_counter(), []
        self.transactions += 1
        try:
            with self.inner.atomic_writes():  # type: ignore[attr-defined]
                yield
        finally:
            inside, self._inside = self._inside, None
            self.calls[GROUP].append(time.perf_counter() - started - sum(inside))

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name.startswith("_") or not callable(target):
            return target
        return partial(self._timed, name, target)

    def _timed(self, name: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return target(*args, **kwargs)
        finally:
            took = time.perf_counter() - started
            self.calls[name].append(took)
            if self._inside is not None:
                self._inside.append(took)
            else:
                self.transactions += 1


def _collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())


def _registry() -> ToolRegistry:
    lookup = ToolDefinition(
        name="lookup",
        description="Looks a thing up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        handler=lambda event: {"found": True, "q": event.arguments.get("q", "")},
        argument_resolver=lambda event, context: {"q": "standup"},
    )
    return ToolRegistry([lookup])


def _rounds(mode: str, turns: int) -> list[Sequence[StreamItem] | BaseException]:
    rounds: list[Sequence[StreamItem] | BaseException] = []
    for turn in range(1, turns + 1):
        if mode == "dual_agent":
            rounds.append([*text("Sure, checking.", usage=USAGE), text_event(f"e{turn}", "lookup")])
        else:
            rounds.append([tool_call(f"c{turn}", "lookup", q="standup"), *text(usage=USAGE)])
        rounds.append(text("It is booked for nine.", usage=USAGE))
    return rounds


async def _until_turn_completed(queues: Any) -> None:
    while True:
        output = await asyncio.wait_for(queues.output.get(), timeout=30)
        if output["type"] == "error":
            raise RuntimeError(f"the benchmark turn failed: {output}")
        if output["type"] == "turn_completed":
            return


async def _drive(
    store: TimedStore,
    mode: ToolInvocationMode,
    turns: int,
    on_warm: Callable[[], None],
    on_done: Callable[[], None],
) -> None:
    client = ScriptedChatClient(_rounds(mode, turns + 1))
    runtime = DebugRuntime(client, registry=_registry(), session_store=store)
    request = DebugRunRequest(
        session_id=f"bench-{mode}",
        user_message="Please book the standup.",
        chat_agent=AgentParams(model="bench-model"),
        event_agent=EventAgentParams(enabled_tools=["lookup"], max_event_loops=1),
        tool_invocation_mode=mode,
    )
    queues = runtime.start_session(request)
    await _until_turn_completed(queues)
    on_warm()
    for turn in range(2, turns + 2):
        await queues.input.put(ChatMessage(role="user", content=f"And turn {turn}?"))
        await _until_turn_completed(queues)
    on_done()
    await runtime.aclose()


@dataclass
class Run:
    """One configuration's measurements."""

    label: str
    turns: int
    calls: dict[str, list[float]]
    rows_per_turn: dict[str, float] = field(default_factory=dict)
    wchar_per_turn: float | None = None
    stored_per_turn: float | None = None
    audit_bytes: tuple[int, int] | None = None
    """Audit JSON written in the first and in the last measured turn."""
    transactions_per_turn: float = 0.0
    holds: list[float] = field(default_factory=list)
    hold_cpu: list[float] = field(default_factory=list)
    collected: list[bool] = field(default_factory=list)
    slept: int = 0
    declined_per_turn: float = 0.0


def _wchar() -> int | None:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _row_counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()


def _audit_bytes(path: Path, turn: int) -> int:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        query = "SELECT coalesce(sum(length(details)), 0) FROM audit_logs WHERE turn_index = ?"
        return int(conn.execute(query, (turn,)).fetchone()[0])
    finally:
        conn.close()


def bench_sqlite(
    directory: Path, mode: ToolInvocationMode, synchronous: Synchronous, turns: int
) -> Run:
    path = directory / f"{mode}-{synchronous.lower()}.sqlite3"
    store = TimedStore(SQLiteSessionStore(path, synchronous=synchronous))
    run = Run(f"SQLite {synchronous}, {mode}", turns, {})
    before: dict[str, Any] = {}

    def on_warm() -> None:
        store.forget_warm_up()
        before.update(rows=_row_counts(path), wchar=_wchar(), transactions=store.transactions)

    def on_done() -> None:
        wchar, rows = _wchar(), _row_counts(path)
        run.calls = dict(store.calls)
        run.rows_per_turn = {t: (rows[t] - before["rows"][t]) / turns for t in TABLES}
        if wchar is not None and before["wchar"] is not None:
            run.wchar_per_turn = (wchar - before["wchar"]) / turns
        run.audit_bytes = (_audit_bytes(path, 2), _audit_bytes(path, turns + 1))
        run.transactions_per_turn = (store.transactions - before["transactions"]) / turns
        run.holds, run.hold_cpu, run.slept = list(store.holds), list(store.hold_cpu), store.slept
        run.collected = list(store.collected)
        run.declined_per_turn = store.declined / turns

    asyncio.run(_drive(store, mode, turns, on_warm, on_done))
    store.inner.close()  # checkpoints the WAL into the database file
    run.stored_per_turn = path.stat().st_size / (turns + 1)
    return run


def bench_memory(mode: ToolInvocationMode, turns: int) -> Run:
    store = TimedStore(InMemorySessionStore())
    run = Run(f"in-memory, {mode}", turns, {})

    def on_warm() -> None:
        store.forget_warm_up()

    def on_done() -> None:
        run.calls = dict(store.calls)
        run.holds, run.hold_cpu, run.slept = list(store.holds), list(store.hold_cpu), store.slept
        run.collected = list(store.collected)
        run.declined_per_turn = store.declined / turns

    asyncio.run(_drive(store, mode, turns, on_warm, on_done))
    return run


def _us(values: list[float], quantile: float) -> str:
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(quantile * (len(ordered) - 1)))
    return f"{ordered[index] * 1e6:,.0f}"


def _fs_type(directory: Path) -> str:
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    resolved = str(directory.resolve())
    for line in mounts:
        target, fs_type = line.split()[1:3]
        if resolved.startswith(target) and len(target) > len(best):
            best, kind = target, fs_type
    return kind


def _latency_table(runs: list[Run]) -> list[str]:
    methods = sorted({name for run in runs for name in run.calls})
    lines = [
        "| call | " + " | ".join(run.label for run in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    for method in methods:
        cells = []
        for run in runs:
            values = run.calls.get(method, [])
            per_turn = len(values) / run.turns
            cells.append(
                f"{_us(values, 0.5)} / {_us(values, 0.95)} (×{per_turn:g})" if values else "–"
            )
        lines.append(f"| `{method}` | " + " | ".join(cells) + " |")
    totals = [sum(sum(v) for v in run.calls.values()) / run.turns * 1000 for run in runs]
    total_cells = " | ".join(f"{total:.2f}" for total in totals)
    lines.append(f"| **store time per turn (ms)** | {total_cells} |")
    return lines


def _volume_table(runs: list[Run]) -> list[str]:
    sqlite_runs = [run for run in runs if run.rows_per_turn]
    calls = [
        sum(len(v) for name, v in run.calls.items() if name not in (GROUP, NOW)) / run.turns
        for run in sqlite_runs
    ]
    rows = [
        f"{sum(r.rows_per_turn.values()):g} ("
        + ", ".join(f"{t} {n:g}" for t, n in r.rows_per_turn.items() if n)
        + ")"
        for r in sqlite_runs
    ]
    wchar = [
        "n/a" if r.wchar_per_turn is None else f"{r.wchar_per_turn / 1024:,.1f} KiB"
        for r in sqlite_runs
    ]
    stored = [f"{(r.stored_per_turn or 0) / 1024:,.1f} KiB" for r in sqlite_runs]
    audits = [
        f"{r.audit_bytes[0] / 1024:,.1f} → {r.audit_bytes[1] / 1024:,.1f} KiB"
        if r.audit_bytes
        else "n/a"
        for r in sqlite_runs
    ]
    return [
        "| per turn | " + " | ".join(run.label for run in sqlite_runs) + " |",
        "|---|" + "---:|" * len(sqlite_runs),
        "| store calls | " + " | ".join(f"{c:g}" for c in calls) + " |",
        "| store transactions (a group of calls in one counts once) | "
        + " | ".join(f"{r.transactions_per_turn:g}" for r in sqlite_runs)
        + " |",
        "| rows inserted | " + " | ".join(rows) + " |",
        "| bytes written (`wchar`) | " + " | ".join(wchar) + " |",
        "| database file size ÷ turns | " + " | ".join(stored) + " |",
        "| audit JSON, first → last turn | " + " | ".join(audits) + " |",
    ]


def _spread(values: list[float]) -> str:
    return f"{_us(values, 0.5)} / {_us(values, 0.99)}" if values else "–"


def _longest(values: list[float]) -> str:
    return f"{max(values) * 1e6:,.0f}" if values else "–"


def _store_only(run: Run) -> list[float]:
    return [cpu for cpu, gc_ran in zip(run.hold_cpu, run.collected, strict=True) if not gc_ran]


def _holds_table(runs: list[Run]) -> list[str]:
    lines = [
        "| loop holds by `write_now` | " + " | ".join(run.label for run in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("writes made on the loop, per turn", lambda r: f"{len(r.calls.get(NOW, [])) / r.turns:g}"),
        ("declined (went to the worker thread), per turn", lambda r: f"{r.declined_per_turn:g}"),
        ("hold µs, median / p99", lambda r: _spread(r.holds)),
        ("longest hold µs (wall clock)", lambda r: _longest(r.holds)),
        ("hold µs of CPU, median / p99", lambda r: _spread(r.hold_cpu)),
        ("longest hold µs of CPU", lambda r: _longest(r.hold_cpu)),
        ("holds with a garbage collection inside", lambda r: f"{sum(r.collected)}"),
        ("**longest hold µs of CPU, no collection inside**", lambda r: _longest(_store_only(r))),
        ("holds in which the loop slept (I/O or lock waits)", lambda r: f"{r.slept}"),
    ]  # fmt: skip
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(run) for run in runs) + " |")
    return lines


def report(runs: list[Run], directory: Path) -> str:
    header = [
        f"## Session store: one persisted turn's writes ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"`bench/bench_store.py --turns {runs[0].turns}`: Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}, store "
        f"files on {_fs_type(directory)}. The real runtime drives {runs[0].turns} turns "
        "(after one warm-up turn), each with one tool call and two chat rounds; every store "
        "call it makes is timed where it runs (on the event loop through `write_now`, "
        "else in the worker thread).",
        "",
        "Per-call latency in µs, median / p95 (×calls per turn):",
        "",
    ]
    note = [
        "",
        "The runtime's `chat_agent_request` and `event_agent_request` audits carry the "
        "conversation so far; the store keeps each message once and the audit rows refer "
        "to it, so a turn's audit JSON stays flat as the history grows (last row; "
        "`bench_session_growth.py` measures a 500-turn session).",
    ]
    tables = [*_latency_table(runs), "", *_holds_table(runs), "", *_volume_table(runs)]
    return "\n".join([*header, *tables, *note]) + "\n"


SECTION_START = "<!-- bench_store:start -->"
SECTION_END = "<!-- bench_store:end -->"


def record(section: str) -> None:
    """Replace this benchmark's section of ``bench/RESULTS.md`` (append it the first time)."""
    marked = f"{SECTION_START}\n{section}{SECTION_END}\n"
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    if SECTION_START in text and SECTION_END in text:
        head, rest = text.split(SECTION_START, 1)
        text = head + marked + rest.split(SECTION_END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + marked
    RESULTS.write_text(text, encoding="utf-8")


def all_runs(directory: Path, turns: int) -> list[Run]:
    """The four configurations the report compares."""
    return [
        bench_sqlite(directory, "dual_agent", "NORMAL", turns),
        bench_sqlite(directory, "dual_agent", "FULL", turns),
        bench_sqlite(directory, "chat_agent_tools", "NORMAL", turns),
        bench_memory("dual_agent", turns),
    ]


def suite_run(quick: bool = False) -> Any:
    """The suite's entry point (``python -m bench --only store``): 100 turns, 3 if quick."""
    from bench._common import Report

    turns = 3 if quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        runs = all_runs(Path(tmp), turns)
        section = report(runs, Path(tmp))
    figures = {
        f"store_ms_per_turn[{run.label}]": sum(sum(v) for v in run.calls.values())
        / run.turns
        * 1000
        for run in runs
    }
    figures |= {
        f"longest_hold_cpu_ms[{r.label}]": max(_store_only(r)) * 1e3 for r in runs if r.holds
    }
    figures |= {f"holds_that_slept[{r.label}]": r.slept for r in runs if r.holds}
    return Report(
        "Session store: one persisted turn's writes",
        ".venv/bin/python -m bench --only store",
        section.split("\n", 2)[2],
        [],
        figures,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Time the store writes of persisted turns.")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None, help="where the store files go")
    parser.add_argument("--record", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        runs = all_runs(directory, args.turns)
        section = report(runs, directory)
    print(section)
    if args.record:
        record(section)
        print(f"updated {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
