"""Benchmark 3: fixed cost per turn, without a store and with a durable SQLite store.

Run from the project root::

    .venv/bin/python -m bench --only turn
    .venv/bin/python -m bench.bench_turn [--quick]

One session (``start_session``) runs N short turns: each turn is one user message and
one chat round that streams a single delta; no tools. After one warm-up turn the clock
runs over N turns; we report process CPU per turn (store writes happen in worker
threads, which process CPU includes) and wall time per turn, next to the floor (a relay
task that answers each input with a delta and a ``turn_completed``). With
``SQLiteSessionStore`` (on a temporary file, ``synchronous="NORMAL"``, the default) we
also count the rows each table gained and the bytes written per turn: the growth of the
database file plus its WAL, and ``wchar`` (bytes passed to ``write()``) from
``/proc/self/io``.

``NORMAL`` in WAL mode: a commit survives a crash or kill of the process, but the last
commits before a power loss or OS crash may be lost (the WAL is synced only at
checkpoints); ``FULL`` syncs every commit at the cost of one ``fsync`` per write (see
the store section below for measured FULL numbers).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import SessionStore
from agent_lab.application.tools import ToolRegistry
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from bench._common import Check, ListClient, Report, deltas, median, request, table

TARGET_MS = 0.5
TARGET_STORE_EXTRA_MS = 2.0


@dataclass
class TurnCost:
    cpu_ms: float
    wall_ms: float


async def _until(queues: RuntimeQueues, kind: str) -> None:
    while True:
        message = await queues.output.get()
        if message["type"] == "error":
            raise RuntimeError(f"benchmark turn failed: {message}")
        if message["type"] == kind:
            return


async def session_turns(
    runtime: DebugRuntime,
    run_request: DebugRunRequest,
    turns: int,
    *,
    between: Any = None,
) -> TurnCost:
    """CPU and wall ms per turn over ``turns`` turns, after one warm-up turn.

    ``between`` (a callable) runs before the first and after the last measured turn,
    outside the clock, e.g. to count rows.
    """
    queues = runtime.start_session(run_request)
    await queues.input.put("Warm up.")
    await _until(queues, "turn_completed")
    if between is not None:
        between()
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(turns):
        await queues.input.put(f"Turn {n}: what is on the calendar?")
        await _until(queues, "turn_completed")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if between is not None:
        between()
    await queues.input.put(None)
    await _until(queues, "done")
    await runtime.aclose()
    return TurnCost(cpu / turns * 1000, wall / turns * 1000)


async def relay_turns(turns: int) -> TurnCost:
    """The floor: a task that answers every input with one delta and ``turn_completed``."""
    queues = RuntimeQueues()

    async def relay() -> None:
        while (await queues.input.get()) is not None:
            await queues.output.put({"type": "message_delta", "content": "ok"})
            await queues.output.put({"type": "turn_completed"})

    task = asyncio.create_task(relay())
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(turns):
        await queues.input.put(f"Turn {n}")
        await _until(queues, "turn_completed")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await queues.input.put(None)
    await task
    return TurnCost(cpu / turns * 1000, wall / turns * 1000)


@dataclass
class StoreVolume:
    rows: dict[str, float]
    file_bytes: float
    wchar_bytes: float | None


class VolumeMeter:
    """Rows per table, file + WAL size and ``wchar``, read twice around the turns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.marks: list[tuple[dict[str, int], int, int | None]] = []

    def __call__(self) -> None:
        self.marks.append((row_counts(self.path), _file_bytes(self.path), _wchar()))

    def per_turn(self, turns: int) -> StoreVolume:
        (rows0, size0, w0), (rows1, size1, w1) = self.marks[-2:]
        rows = {t: (rows1[t] - rows0[t]) / turns for t in rows1 if rows1[t] != rows0.get(t)}
        wchar = (w1 - w0) / turns if w0 is not None and w1 is not None else None
        return StoreVolume(rows, (size1 - size0) / turns, wchar)


def row_counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        names = [
            row[0]
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith("sqlite_")
        ]
        return {
            name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names
        }
    finally:
        conn.close()


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _wchar() -> int | None:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def runtime_for(store: SessionStore | None, client: Any = None) -> DebugRuntime:
    client = client if client is not None else ListClient(deltas(1, "Sure."))
    return DebugRuntime(client, registry=ToolRegistry(), session_store=store)


def measure_plain(turns: int) -> TurnCost:
    return asyncio.run(session_turns(runtime_for(None), request(user=""), turns))


def measure_sqlite(directory: Path, turns: int) -> tuple[TurnCost, StoreVolume]:
    path = directory / f"turns-{time.perf_counter_ns()}.sqlite3"
    store = SQLiteSessionStore(path)
    meter = VolumeMeter(path)
    try:
        cost = asyncio.run(
            session_turns(
                runtime_for(store), request(user="", session_id="bench"), turns, between=meter
            )
        )
    finally:
        store.close()
    return cost, meter.per_turn(turns)


LABELS = ("floor (queue relay)", "agent_lab, no store", "agent_lab, SQLite store (NORMAL)")


def run(quick: bool = False) -> Report:
    turns, runs = (5, 1) if quick else (50, 5)
    costs: dict[str, list[TurnCost]] = {label: [] for label in LABELS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):  # interleaved, so all three share the machine's moods
            costs[LABELS[0]].append(asyncio.run(relay_turns(turns)))
            costs[LABELS[1]].append(measure_plain(turns))
            cost, volume = measure_sqlite(Path(tmp), turns)
            costs[LABELS[2]].append(cost)
    cpu = {label: median([c.cpu_ms for c in values]) for label, values in costs.items()}
    wall = {label: median([c.wall_ms for c in values]) for label, values in costs.items()}
    plain, extra = cpu[LABELS[1]], cpu[LABELS[2]] - cpu[LABELS[1]]
    return Report(
        "3. Fixed cost per turn",
        ".venv/bin/python -m bench --only turn",
        _markdown(cpu, wall, extra, volume, (turns, runs)),
        [
            Check(
                "3 turn", "CPU ms per turn, no store", f"{plain:.3f}", "≤ 0.5", plain <= TARGET_MS
            ),
            Check(
                "3 turn",
                "extra CPU ms per turn, SQLite store",
                f"{extra:.3f}",
                "≤ 2",
                extra <= TARGET_STORE_EXTRA_MS,
            ),
        ],
        {f"cpu_ms[{label}]": value for label, value in cpu.items()}
        | {
            "store_extra_cpu_ms": extra,
            "store_rows_per_turn": sum(volume.rows.values()),
            "store_file_bytes_per_turn": volume.file_bytes,
        },
    )


def _markdown(
    cpu: dict[str, float],
    wall: dict[str, float],
    extra: float,
    volume: StoreVolume,
    shape: tuple[int, int],
) -> str:
    turns, runs = shape
    floor = cpu[LABELS[0]]
    rows = [(n, f"{cpu[n]:.3f}", f"{wall[n]:.3f}", f"{cpu[n] / floor:.1f}×") for n in LABELS]
    rows_text = ", ".join(f"{t} {n:g}" for t, n in volume.rows.items())
    wchar = "n/a" if volume.wchar_bytes is None else f"{volume.wchar_bytes / 1024:.1f} KiB"
    return "\n".join(
        [
            f"{turns} turns per run after a warm-up turn (one delta each, no tools; the "
            f"history grows from 2 to {2 * turns + 2} messages), median of {runs} runs. "
            "SQLite: WAL, `synchronous=NORMAL` (the default; `docs/benchmarks.md` explains the "
            "trade-off).",
            "",
            table(["configuration", "CPU ms / turn", "wall ms / turn", "÷ floor (CPU)"], rows),
            "",
            f"Extra CPU per turn with the SQLite store: **{extra:.3f} ms**. Per turn it "
            f"inserts {sum(volume.rows.values()):g} rows ({rows_text}); the database file + "
            f"WAL grow by {volume.file_bytes / 1024:.1f} KiB and the process hands {wchar} "
            "to `write()` (WAL frames, checkpoints included).",
        ]
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
