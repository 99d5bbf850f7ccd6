"""The tables and checks of benchmark 5 (``bench_scaling``)."""

from __future__ import annotations

from dataclasses import dataclass

from bench._common import Check, Report, table
from bench.bench_concurrency import TARGET_P99_MS, LoadResult


@dataclass
class Scaling:
    delta: dict[int, float]
    """Marginal µs per delta by history size."""
    per_turn: dict[str, dict[int, float]]
    """CPU ms per turn by configuration, then history size."""
    per_batch: dict[str, dict[int, float]]
    """CPU ms per one-shot turn by configuration, then batch size."""
    loads: dict[int, LoadResult]
    """Concurrent load by history size."""
    shape: tuple[int, int, int, int]
    """Short and long answer (deltas), runs per median, turns per run."""


def growth(values: dict[int, float]) -> float:
    return values[max(values)] / values[min(values)]


def _rows(values: dict[str, dict[int, float]], digits: int) -> list[list[str]]:
    return [
        [name, *(f"{v:.{digits}f}" for v in row.values()), f"{growth(row):.2f}×"]
        for name, row in values.items()
    ]


def _delta_section(results: Scaling) -> str:
    short, long, runs, _ = results.shape
    delta = results.delta
    row = ["µs / delta", *(f"{v:.2f}" for v in delta.values()), f"{growth(delta):.2f}×"]
    return "\n".join(
        [
            f"Marginal CPU µs per delta (slope between {short:,} and {long:,} deltas, "
            f"median of {runs}):",
            "",
            table(["history", *(f"{s:,} msgs" for s in delta), "growth"], [row]),
        ]
    )


def _turn_section(results: Scaling) -> str:
    _, _, runs, turns = results.shape
    sizes = next(iter(results.per_turn.values()))
    return "\n".join(
        [
            f"CPU ms per turn ({turns} one-delta session turns after the prior messages, "
            f"median of {runs}):",
            "",
            table(
                ["history", *(f"{s:,} msgs" for s in sizes), "growth"],
                _rows(results.per_turn, 3),
            ),
        ]
    )


def _batch_section(results: Scaling) -> str:
    _, _, runs, turns = results.shape
    batches = list(next(iter(results.per_batch.values())))
    first, last = batches[0], batches[-1]
    rows = [
        [*row, f"{(values[last] - values[first]) / (last - first) * 1000:.0f}"]
        for row, values in zip(_rows(results.per_batch, 2), results.per_batch.values(), strict=True)
    ]
    header = ["tool mode, store", *(f"N = {b}" for b in batches), "growth", "µs / extra call"]
    return "\n".join(
        [
            "CPU ms per one-shot turn (`run()` from an empty history, so only the batch "
            "grows; with the store each run also opens a session) whose first round asks for "
            f"N trivial tool calls ({turns} turns, median of {runs}):",
            "",
            table(header, rows),
        ]
    )


def _load_section(results: Scaling) -> str:
    header = ["history", "sessions × turns", "p50 ms", "p99 ms", "CPU % of a core"]
    rows = [
        [f"{size:,}", f"{r.sessions} × {r.turns}", f"{r.p(0.5):.2f}", f"{r.p(0.99):.2f}"]
        + [f"{r.cpu_percent:.0f}", f"{len(r.gc_pauses_ms)} ({max(r.gc_pauses_ms, default=0):.0f})"]
        for size, r in results.loads.items()
    ]
    return "\n".join(
        [
            "In-process concurrent sessions (benchmark 4's load and latency) by history:",
            "",
            table([*header, "full GCs (max ms)"], rows),
        ]
    )


def _checks(results: Scaling, flat_limit: float) -> list[Check]:
    sizes = list(results.delta)
    linear = max(sizes) / min(sizes)
    turn_growth = [growth(row) for row in results.per_turn.values()]
    flat = growth(results.delta)
    history, longest = max(results.loads), results.loads[max(results.loads)]
    return [
        Check(
            "5 scaling",
            f"per-delta CPU, {max(sizes):,} vs {min(sizes)} prior messages",
            f"{flat:.2f}×",
            f"flat (≤ {flat_limit:g}×)",
            flat <= flat_limit,
        ),
        Check(
            "5 scaling",
            "per-turn CPU growth with history (no store / SQLite)",
            " / ".join(f"{g:.1f}×" for g in turn_growth),
            f"≤ linear ({linear:g}×)",
            max(turn_growth) <= linear,
        ),
        Check(
            "5 scaling",
            f"p99 delay, {history:,}-message history ({longest.sessions} sessions, in-process)",
            f"{longest.p(0.99):.2f} ms",
            f"≤ {TARGET_P99_MS:g} ms",
            longest.p(0.99) <= TARGET_P99_MS and not longest.failed,
        ),
    ]


def report(results: Scaling, flat_limit: float) -> Report:
    figures = {f"delta_us[{s}]": v for s, v in results.delta.items()}
    for label, values in (("turn_ms", results.per_turn), ("batch_ms", results.per_batch)):
        figures |= {f"{label}[{n}][{k}]": v for n, row in values.items() for k, v in row.items()}
    figures |= {f"p99_ms[history {s}]": r.p(0.99) for s, r in results.loads.items()}
    sections = [_delta_section, _turn_section, _batch_section, _load_section]
    return Report(
        "5. Scaling with history and batch size",
        ".venv/bin/python -m bench --only scaling",
        "\n\n".join(section(results) for section in sections),
        _checks(results, flat_limit),
        figures,
    )
