"""Sessions at server scale: what a conversation costs around its deltas.

Run from the project root::

    .venv/bin/python -m bench --only sessions
    .venv/bin/python -m bench.bench_sessions [--quick]

Each session builds its own runtime with the default tools, as a server does per
conversation. Side by side in one run:

* **construction**: CPU ms per ``DebugRuntime(client)`` with the default tools;
* **session life**: ``DebugRuntime(client)`` → ``start_session`` → first turn (one
  delta) → input closed → ``done`` → ``aclose()``, without a store and with
  ``SQLiteSessionStore`` (a new session id each time), next to the floor (a relay task
  answering one input) and the OpenAI Agents SDK (one ``Runner.run_streamed`` turn of
  one delta, agent built per run);
* **1,000 concurrent paced sessions** (in-process simulated model: 300 ms TTFT,
  40 tokens/s; one arrival loop starts each session when due, over one second), each in
  a fresh interpreter (``bench/_session_load.py``), the collector at its defaults: the
  bare-asyncio floor and agent_lab, interleaved. Delay p50/p99/max, CPU (% of a core
  and seconds), the collector's runs per generation (young collections run on the net
  growth of container objects; every 11th young one is a middle one, every 11th middle
  one may be full), full collections (count, longest pause), the longest middle
  collection, RSS growth per session and the largest event-loop lag (a 10 ms
  heartbeat, the same in both). Five runs; every run is listed. The p99 ratio and RSS
  verdicts take the median run; the full-GC pause and loop-lag verdicts take the worst
  run, since their targets say "none".
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from bench import _peers
from bench._common import (
    Check,
    ListClient,
    Report,
    deltas,
    fresh_process_json,
    median,
    percentile,
    request,
    table,
)
from bench.bench_turn import relay_turns

TARGET_CONSTRUCT_MS = 0.2
TARGET_LIFE_MS = 0.5
TARGET_LIFE_SQLITE_MS = 2.0
TARGET_P99_RATIO = 2.0
TARGET_GC_PAUSE_MS = 20.0
TARGET_RSS_KIB = 20.0
TARGET_STALL_MS = 20.0


def construction_ms(count: int) -> float:
    client = ListClient(deltas(1, "Sure."))
    started = time.process_time()
    for _ in range(count):
        DebugRuntime(client)
    return (time.process_time() - started) / count * 1000


async def _lives(count: int, store: SQLiteSessionStore | None) -> float:
    client = ListClient(deltas(1, "Sure."))
    prefix = f"life-{time.perf_counter_ns()}-"
    started = time.process_time()
    for n in range(count):
        runtime = DebugRuntime(client, session_store=store)
        session_id = f"{prefix}{n}" if store is not None else None
        queues = runtime.start_session(request(user="", session_id=session_id))
        await queues.input.put("Hello there.")
        while (message := await queues.output.get())["type"] != "turn_completed":
            if message["type"] == "error":
                raise RuntimeError(f"benchmark session failed: {message}")
        await queues.input.put(None)
        while (await queues.output.get())["type"] != "done":
            pass
        await runtime.aclose()
    return (time.process_time() - started) / count * 1000


def life_ms(count: int, store: SQLiteSessionStore | None) -> float:
    return asyncio.run(_lives(count, store))


def floor_life_ms(count: int) -> float:
    return asyncio.run(relay_turns(count)).cpu_ms


def agents_life_ms(count: int) -> float:
    events = _peers.agents_text_events(1)

    async def lives() -> float:
        started = time.process_time()
        for _ in range(count):
            await _peers.agents_stream(_peers.agents_replay_model(events))
        return (time.process_time() - started) / count * 1000

    return asyncio.run(lives())


def lifecycle(quick: bool) -> dict[str, float]:
    count, runs = (20, 1) if quick else (200, 5)
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteSessionStore(Path(tmp) / "sessions.sqlite3")
        try:
            cases: dict[str, Callable[[], float]] = {
                "floor: relay task answering one input": lambda: floor_life_ms(count),
                "runtime construction, default tools": lambda: construction_ms(count),
                "agent_lab session life, no store": lambda: life_ms(count, None),
                "agent_lab session life, SQLite": lambda: life_ms(count, store),
            }
            version = _peers.available().get("openai-agents")
            if version is not None:
                cases[f"OpenAI Agents SDK {version}: one streamed run"] = lambda: agents_life_ms(
                    count
                )
            for case in cases.values():  # warm-up
                case()
            for _ in range(runs):
                for name, case in cases.items():
                    samples.setdefault(name, []).append(case())
        finally:
            store.close()
    return {name: median(values) for name, values in samples.items()}


def load_run(variant: str, sessions: int, speed: float) -> dict[str, Any]:
    args = ["-m", "bench._session_load", variant, str(sessions), str(speed)]
    result: dict[str, Any] = fresh_process_json(args, timeout=600)
    return result


def concurrency(quick: bool) -> list[dict[str, dict[str, Any]]]:
    """Interleaved runs, floor then agent_lab each time; one pair per run."""
    sessions, speed, runs = (30, 10.0, 1) if quick else (1000, 1.0, 5)
    pairs = []
    for _ in range(runs):
        pair = {variant: load_run(variant, sessions, speed) for variant in ("floor", "agent_lab")}
        for result in pair.values():
            result["p99"] = percentile(result["delays_ms"], 0.99)
            result["sessions"] = sessions
        pairs.append(pair)
    return pairs


def _median_pair(pairs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The pair whose p99 ratio is the median of the runs."""
    return sorted(pairs, key=_p99_ratio)[len(pairs) // 2]


def _p99_ratio(pair: dict[str, dict[str, Any]]) -> float:
    ours, floor = pair["agent_lab"]["p99"], pair["floor"]["p99"]
    return float(ours / floor) if floor > 0 else float("inf")


def _spread(values: list[float], unit: str, digits: int) -> str:
    low, mid, high = min(values), median(values), max(values)
    return f"{mid:.{digits}f}{unit} ({low:.{digits}f}–{high:.{digits}f})"


def run(quick: bool = False) -> Report:
    lives = lifecycle(quick)
    pairs = concurrency(quick)
    return _report(lives, pairs)


def _load_rows(pair: dict[str, dict[str, Any]]) -> list[tuple[object, ...]]:
    return [
        (
            name,
            r["sessions"],
            len(r["delays_ms"]),
            f"{percentile(r['delays_ms'], 0.5):.2f}",
            f"{r['p99']:.2f}",
            f"{max(r['delays_ms'], default=0):.1f}",
            f"{r['cpu_percent']:.0f}",
            " / ".join(map(str, r["collections"])),
            f"{len(r['gc_pauses_ms'])} ({max(r['gc_pauses_ms'], default=0):.0f})",
            f"{r['cpu_s']:.2f}",
            f"{r['rss_kib_per_session']:.1f}",
            f"{r['loop_lag_max_ms']:.1f}",
        )
        for name, r in pair.items()
    ]


def _run_rows(pairs: list[dict[str, dict[str, Any]]]) -> list[tuple[object, ...]]:
    """One row per run: agent_lab's figures next to the floor's of the same run."""
    rows: list[tuple[object, ...]] = []
    for n, pair in enumerate(pairs, 1):
        ours, floor = pair["agent_lab"], pair["floor"]
        rows.append(
            (
                n,
                f"{ours['p99']:.2f} / {floor['p99']:.2f}",
                f"{_p99_ratio(pair):.2f}×",
                f"{ours['rss_kib_per_session']:.1f} / {floor['rss_kib_per_session']:.1f}",
                f"{_longest_pause(ours):.1f} / {_longest_pause(floor):.1f}",
                f"{_longest_pause(ours, 'middle'):.1f} / {_longest_pause(floor, 'middle'):.1f}",
                f"{ours['loop_lag_max_ms']:.1f} / {floor['loop_lag_max_ms']:.1f}",
            )
        )
    return rows


def _longest_pause(result: dict[str, Any], generation: str = "full") -> float:
    key = "gc_pauses_ms" if generation == "full" else "middle_gc_pauses_ms"
    return float(max(result[key], default=0.0))


def _report(lives: dict[str, float], pairs: list[dict[str, dict[str, Any]]]) -> Report:
    floor_life = lives["floor: relay task answering one input"]
    life_rows = [(name, f"{ms:.3f}", f"{ms / floor_life:.1f}×") for name, ms in lives.items()]
    header = ["variant", "sessions", "deltas", "p50 ms", "p99 ms", "max ms", "CPU %"]
    header += ["collections young / middle / full", "full GCs (max ms)", "CPU s"]
    header += ["RSS KiB / session", "largest loop lag ms"]
    runs_header = ["run", "p99 ms, agent_lab / floor", "p99 ÷ floor"]
    runs_header += ["RSS KiB / session", "longest full GC ms", "longest middle GC ms"]
    runs_header += ["largest loop lag ms"]
    chosen = _median_pair(pairs)
    ours, floor = chosen["agent_lab"], chosen["floor"]
    ratios = [_p99_ratio(pair) for pair in pairs]
    rss = [pair["agent_lab"]["rss_kib_per_session"] for pair in pairs]
    ratio, rss_kib = median(ratios), median(rss)
    pause = max(_longest_pause(pair["agent_lab"]) for pair in pairs)
    stall = max(pair["agent_lab"]["loop_lag_max_ms"] for pair in pairs)
    construct = lives["runtime construction, default tools"]
    plain = lives["agent_lab session life, no store"]
    sqlite = lives["agent_lab session life, SQLite"]
    markdown = "\n".join(
        [
            "CPU ms per session (median of interleaved runs); each session builds its own "
            "runtime with the default tools. Session life = construction, `start_session`, "
            "one one-delta turn, input closed, `done`, `aclose()`.",
            "",
            table(["figure", "CPU ms", "÷ floor"], life_rows),
            "",
            f"{ours['sessions']} concurrent paced sessions in-process (300 ms TTFT, 40 "
            "tokens/s, started over 1 s by one arrival loop), one runtime each, default "
            f"collector settings, each run in a fresh interpreter; {len(pairs)} runs, each "
            "the floor then agent_lab. The run with the median p99 ratio:",
            "",
            table(header, _load_rows(chosen)),
            "",
            "Every run (agent_lab / floor of the same run):",
            "",
            table(runs_header, _run_rows(pairs)),
            "",
            f"Over the runs, agent_lab: p99 ÷ floor {_spread(ratios, '×', 2)}, RSS per session "
            f"{_spread(rss, ' KiB', 1)} (median, min–max); longest full-GC pause {pause:.1f} ms "
            f"and largest loop lag {stall:.1f} ms (the worst of any run).",
        ]
    )
    bench = "sessions"
    checks = [
        Check(bench, "runtime construction, default tools (CPU ms)", f"{construct:.3f}",
              "≤ 0.2", construct <= TARGET_CONSTRUCT_MS),
        Check(bench, "session start → first turn → close, no store (CPU ms)", f"{plain:.3f}",
              "≤ 0.5", plain <= TARGET_LIFE_MS),
        Check(bench, "same, with SQLite (CPU ms)", f"{sqlite:.3f}", "≤ 2",
              sqlite <= TARGET_LIFE_SQLITE_MS),
        Check(bench, f"p99 delay ÷ bare-asyncio floor, {ours['sessions']} sessions (median run)",
              f"{ratio:.2f}× ({ours['p99']:.1f} / {floor['p99']:.1f} ms)", "≤ 2×",
              ratio <= TARGET_P99_RATIO),
        Check(bench, "longest full-GC pause, default collector (any run)", f"{pause:.1f} ms",
              "≤ 20 ms", pause <= TARGET_GC_PAUSE_MS),
        Check(bench, "RSS per session (median run)", f"{rss_kib:.1f} KiB", "≤ 20 KiB",
              rss_kib <= TARGET_RSS_KIB),
        Check(bench, "largest event-loop lag (any agent_lab run)", f"{stall:.1f} ms", "≤ 20 ms",
              stall <= TARGET_STALL_MS),
    ]  # fmt: skip
    figures = {f"cpu_ms[{name}]": ms for name, ms in lives.items()}
    for name, r in chosen.items():
        figures |= {f"p99_ms[{name}]": r["p99"], f"rss_kib[{name}]": r["rss_kib_per_session"]}
        figures |= {f"loop_lag_ms[{name}]": r["loop_lag_max_ms"]}
        figures |= {f"young_collections[{name}]": float(r["collections"][0])}
    figures |= {"p99_ratio_median": ratio, "rss_kib_median": rss_kib, "gc_pause_ms_max": pause}
    return Report(
        "Sessions at server scale",
        ".venv/bin/python -m bench --only sessions",
        markdown,
        checks,
        figures,
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
