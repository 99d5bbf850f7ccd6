"""Benchmark: HTTP transports side by side for many concurrent paced streams.

Run from the project root (about 2-3 minutes; the ``bench`` extra adds ``uvloop``)::

    .venv/bin/python -m bench --only transport
    .venv/bin/python -m bench.bench_transport [--quick] [--sessions 100 1000] [--rounds 2]
    .venv/bin/python -m bench.bench_transport --profile 1000   # cProfile of two clients

The simulated provider (``bench/_sim_server.py``: 300 ms to first token, 40 tokens/s,
every chunk stamped with its send time) runs in its own process. Every client runs in
a fresh process of its own (``bench/_transport_worker.py``), so each starts from the
same state and uvloop can be compared with asyncio; the setups take turns in one run
(interleaved), so all see the same machine. N streams start evenly over one second;
each is one streamed chat call whose chunks go through the real chunk parser. Delay =
receive time − send stamp, per chunk. CPU is the client processes' own CPU time (not
the provider's), also divided by the chunks received: the figure that decides how many
streams one core can hold, and the one that a loaded machine disturbs least.

A setup with P processes runs N/P streams in each of P client processes started at
the same moment: the multi-process layout (``agent-lab serve --workers P``). "1 of 4
processes alone" runs N/4 streams in one process: one process of a four-process layout
when each has a core of its own, which a 2-core machine cannot give four processes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Check, Report, percentile, server_process_and_pid, table  # noqa: E402
from bench._machine import load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SERVER = Path(__file__).with_name("_sim_server.py")
TARGET_P99_MS = 50.0
TARGET_LAG_MS = 20.0
HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None
HAS_AIOHTTP = importlib.util.find_spec("aiohttp") is not None
HAS_HTTPX_AIOHTTP = importlib.util.find_spec("httpx_aiohttp") is not None


@dataclass(frozen=True)
class Setup:
    label: str
    client: str
    """A ``_transport_worker.CLIENTS`` key."""
    loop: str = "asyncio"
    processes: int = 1
    of: int = 1
    """Run only 1/``of`` of the streams, in one process: one process of an ``of``-process
    layout, measured alone (what it gets when each process has a core of its own)."""


def setups() -> list[Setup]:
    loop = "uvloop" if HAS_UVLOOP else "asyncio"
    found = [Setup("chat client, httpx", "chat-httpx")]
    if HAS_HTTPX_AIOHTTP:
        found.append(Setup("chat client, httpx-aiohttp (SDK)", "chat-httpx-aiohttp"))
    if HAS_AIOHTTP:
        found.append(Setup("chat client, aiohttp (default)", "chat-aiohttp"))
        if HAS_UVLOOP:
            found.append(Setup("chat client, aiohttp, uvloop", "chat-aiohttp", "uvloop"))
        found.append(Setup(f"chat client, aiohttp, {loop}, 2 processes", "chat-aiohttp", loop, 2))
        found.append(
            Setup(
                f"chat client, aiohttp, {loop}, 1 of 4 processes alone", "chat-aiohttp", loop, of=4
            )
        )
    found.append(Setup("httpx directly (no SDK)", "httpx"))
    if HAS_AIOHTTP:
        found.append(Setup("aiohttp directly (no SDK)", "aiohttp"))
    return found


@contextlib.contextmanager
def provider() -> Iterator[tuple[str, int]]:
    """The simulated provider in its own process: (base URL, pid)."""
    with server_process_and_pid(SERVER) as started:
        yield started


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_setup(setup: Setup, base_url: str, streams: int, profile: int = 0) -> list[dict[str, Any]]:
    """Runs the setup's client processes together; one figures dict per process."""
    command = [sys.executable, "-m", "bench._transport_worker", setup.client, setup.loop]
    share = max(1, streams // (setup.processes * setup.of))
    extra = ["--profile", str(profile)] if profile else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    folder = tempfile.TemporaryDirectory(prefix="bench-transport-")
    outputs = [Path(folder.name) / f"worker-{n}.json" for n in range(setup.processes)]
    workers = [
        subprocess.Popen(
            [*command, base_url, str(share), str(out), *extra],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for out in outputs
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            if worker.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {setup.client} worker did not start")
        start = time.perf_counter() + 0.2
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{start}\n")
            worker.stdin.flush()
        for worker in workers:
            if worker.wait(timeout=120) != 0:
                raise RuntimeError(f"a {setup.client} worker failed ({worker.returncode})")
        return [json.loads(out.read_text(encoding="utf-8")) for out in outputs]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        folder.cleanup()


def summarize(parts: list[dict[str, Any]], server_cpu: float) -> dict[str, float]:
    delays = [d for part in parts for d in part["delays_ms"]]
    chunks = len(delays)
    cpu = sum(part["cpu_s"] for part in parts)
    wall = max(part["wall_s"] for part in parts)
    return {
        "p50": percentile(delays, 0.5),
        "p99": percentile(delays, 0.99),
        "max": max(delays, default=float("nan")),
        "lag": max(part["max_lag_ms"] for part in parts),
        "cpu_us_per_chunk": cpu / chunks * 1e6 if chunks else float("nan"),
        "cpu_percent": cpu / wall * 100,
        "server_percent": server_cpu / wall * 100,
        "wall": wall,
        "chunks": float(chunks),
        "failed": float(sum(len(part["failures"]) for part in parts)),
    }


Results = dict[tuple[int, str], dict[str, float]]


def measure_all(
    sizes: list[int], rounds: int
) -> tuple[Results, dict[tuple[int, str], list[dict[str, float]]], list[str]]:
    """Every setup at every size, setups taking turns; the best-p99 round of each is kept."""
    results: Results = {}
    per_process: dict[tuple[int, str], list[dict[str, float]]] = {}
    notes: list[str] = []
    with provider() as (base_url, server_pid):
        for streams in sizes:
            for _ in range(rounds):
                for setup in setups():
                    before = cpu_of(server_pid)
                    parts = run_setup(setup, base_url, streams)
                    figures = summarize(parts, cpu_of(server_pid) - before)
                    key = (streams, setup.label)
                    if key not in results or figures["p99"] < results[key]["p99"]:
                        results[key] = figures
                        per_process[key] = [summarize([part], 0.0) for part in parts]
                    failures = sorted({f for part in parts for f in part["failures"]})
                    if failures:
                        notes.append(f"{setup.label}, {streams} streams: {'; '.join(failures)}")
    return results, per_process, notes


def _rows(results: Results) -> list[tuple[object, ...]]:
    return [
        (
            label,
            streams,
            int(r["chunks"]),
            f"{r['p50']:.1f}",
            f"{r['p99']:.1f}",
            f"{r['max']:.0f}",
            f"{r['lag']:.0f}",
            f"{r['cpu_us_per_chunk']:.0f}",
            f"{r['cpu_percent']:.0f}",
            f"{r['server_percent']:.0f}",
            f"{r['wall']:.1f}",
            int(r["failed"]),
        )
        for (streams, label), r in results.items()
    ]


HEADER = [
    "client",
    "streams",
    "chunks",
    "p50 ms",
    "p99 ms",
    "max ms",
    "loop lag max ms",
    "client CPU µs/chunk",
    "client CPU %",
    "provider CPU %",
    "wall s",
    "failed",
]


def _per_process_table(per_process: dict[tuple[int, str], list[dict[str, float]]]) -> str:
    rows = [
        (label, streams, index + 1, int(p["chunks"]), f"{p['p99']:.1f}", f"{p['lag']:.0f}")
        + (f"{p['cpu_us_per_chunk']:.0f}", f"{p['cpu_percent']:.0f}")
        for (streams, label), parts in per_process.items()
        if len(parts) > 1
        for index, p in enumerate(parts)
    ]
    header = ["layout", "streams", "process", "chunks", "p99 ms", "lag max ms"]
    return table([*header, "CPU µs/chunk", "CPU %"], rows, left=1) if rows else ""


def run(quick: bool = False, sizes: list[int] | None = None, rounds: int = 1) -> Report:
    sizes = sizes or ([10] if quick else [100, 1000])
    started = load()
    results, per_process, notes = measure_all(sizes, rounds)
    markdown = (
        f"Load average at the start: {started}; at the end: {load()}. One streamed call per "
        "stream, started evenly over 1 s; provider in another process (300 ms TTFT, 40 "
        "tokens/s); each client in a fresh process. Delay from the provider's send stamp to "
        "the parsed chunk. CPU in % of one core; client CPU per chunk includes each "
        "stream's request.\n\n" + table(HEADER, _rows(results), left=1)
    )
    split = _per_process_table(per_process)
    if split:
        markdown += "\n\nPer process of the multi-process layouts:\n\n" + split
    if notes:
        markdown += "\n\nFailed streams: " + "; ".join(notes) + "."
    largest = max(sizes)
    single = {
        k: r
        for k, r in results.items()
        if k[0] == largest and k[1].startswith("chat client") and "process" not in k[1]
    }
    best = min(single, key=lambda k: single[k]["p99"])
    split_keys = [k for k in results if k[0] == largest and "process" in k[1]]
    checks = [
        _check(f"p99 delay, {best[1]}, {largest} streams (best of one process)", results[best])
    ]
    checks += [_check(f"p99 delay, {k[1]}, {largest} streams", results[k]) for k in split_keys]
    lag_key = split_keys[0] if split_keys else best
    lag = results[lag_key]["lag"]
    checks.append(
        Check(
            "transport",
            f"largest loop stall, {lag_key[1]}, {largest} streams",
            f"{lag:.1f} ms",
            f"≤ {TARGET_LAG_MS:.0f} ms",
            lag <= TARGET_LAG_MS,
        )
    )
    figures = {f"{m}[{s}][{n}]": r[m] for (s, n), r in results.items() for m in ("p99", "lag")}
    figures |= {f"cpu_us[{s}][{n}]": r["cpu_us_per_chunk"] for (s, n), r in results.items()}
    return Report(
        "HTTP transports side by side",
        ".venv/bin/python -m bench --only transport",
        markdown,
        checks,
        figures,
    )


def _check(metric: str, figures: dict[str, float]) -> Check:
    p99 = figures["p99"]
    return Check("transport", metric, f"{p99:.1f} ms", "≤ 50 ms", p99 <= TARGET_P99_MS)


def profile(streams: int, top: int = 14) -> None:
    """Prints where the client CPU goes, per client, at ``streams`` streams."""
    with provider() as (base_url, _):
        for setup in (Setup("httpx", "chat-httpx"), Setup("aiohttp", "chat-aiohttp")):
            (figures,) = run_setup(setup, base_url, streams, profile=top)
            chunks = len(figures["delays_ms"])
            per_chunk = figures["cpu_s"] / max(1, chunks) * 1e6
            print(f"## chat client over {setup.label}: {chunks} chunks, {per_chunk:.0f} µs/chunk")
            print(figures["profile"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (best kept)")
    parser.add_argument("--profile", type=int, metavar="STREAMS", default=0)
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    report = run(args.quick, args.sessions, args.rounds)
    print(report.markdown)
    for check in report.checks:
        print(f"- {check.metric}: {check.value} (target {check.target})")


if __name__ == "__main__":
    main()
