"""Benchmark 1: runtime CPU per streamed delta, next to the floor and the peers.

Run from the project root::

    .venv/bin/python -m bench --only delta          # this benchmark, via the suite
    .venv/bin/python -m bench.bench_delta [--quick]  # print this section only

A zero-latency in-process client yields prebuilt ``StreamItem.message_delta`` items;
``DebugRuntime.run`` (no store, no tools) turns them into output messages that we
consume. Side by side, with the same number of deltas, all built before the clock
starts: the floor (a bare ``asyncio.Queue`` relay: a producer task puts one dict per
delta, the consumer gets them), the OpenAI Agents SDK (``Runner.run_streamed`` over a
``Model`` replaying Responses stream events, tracing disabled) and Pydantic AI
(``FunctionModel`` stream function, ``run_stream`` + ``stream_text(delta=True)``).
CPU time of a whole run divided by the deltas, median of several interleaved runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from agent_lab.application.runtime import DebugRuntime
from bench import _peers
from bench._common import (
    Check,
    ListClient,
    Report,
    cpu_seconds,
    deltas,
    drain,
    interleaved,
    median,
    queue_relay,
    request,
    table,
)

TARGET_US = 2.0
TARGET_FLOOR_RATIO = 2.5
TARGET_PEER_RATIO = 3.0


def cases(count: int) -> dict[str, Callable[[], float]]:
    """One CPU-seconds measurement per implementation, inputs prebuilt."""
    items = deltas(count)
    run_request = request()
    found: dict[str, Callable[[], float]] = {
        "floor (asyncio.Queue relay)": lambda: cpu_seconds(lambda: queue_relay(count)),
        "agent_lab DebugRuntime.run": lambda: cpu_seconds(
            lambda: drain(DebugRuntime(ListClient(items)).run(run_request))
        ),
    }
    peers = _peers.available()
    if "openai-agents" in peers:
        events = _peers.agents_text_events(count)
        found[f"OpenAI Agents SDK {peers['openai-agents']}"] = lambda: cpu_seconds(
            lambda: _peers.agents_stream(_peers.agents_replay_model(events))
        )
    if "pydantic-ai-slim" in peers:
        found[f"Pydantic AI {peers['pydantic-ai-slim']}"] = lambda: cpu_seconds(
            lambda: _peers.pydantic_ai_stream(_peers.pydantic_ai_model(count))
        )
    return found


def run(quick: bool = False) -> Report:
    count, runs = (2_000, 1) if quick else (100_000, 5)
    samples = interleaved(cases(count), runs)
    per_delta = {name: median(values) / count * 1e6 for name, values in samples.items()}
    names = list(per_delta)
    floor, ours = per_delta[names[0]], per_delta[names[1]]
    peers = {name: value for name, value in per_delta.items() if name not in names[:2]}
    rows = [
        (name, f"{us:.2f}", f"{us / floor:.2f}×", f"{us / ours:.2f}×")
        for name, us in per_delta.items()
    ]
    markdown = "\n".join(
        [
            f"{count:,} deltas per run; CPU µs per delta, median of {runs} interleaved runs.",
            "",
            table(["implementation", "µs / delta", "÷ floor", "÷ agent_lab"], rows),
        ]
    )
    checks = [
        Check(
            "1 delta",
            "agent_lab µs per delta",
            f"{ours:.2f}",
            f"≤ {TARGET_US:g}",
            ours <= TARGET_US,
        ),
        Check(
            "1 delta",
            "agent_lab ÷ floor",
            f"{ours / floor:.2f}×",
            f"≤ {TARGET_FLOOR_RATIO:g}×",
            ours / floor <= TARGET_FLOOR_RATIO,
        ),
    ]
    if peers:
        fastest = min(peers, key=peers.__getitem__)
        ratio = peers[fastest] / ours
        checks.append(
            Check(
                "1 delta",
                f"fastest peer ({fastest}) ÷ agent_lab",
                f"{ratio:.1f}×",
                f"≥ {TARGET_PEER_RATIO:g}×",
                ratio >= TARGET_PEER_RATIO,
            )
        )
    figures = {f"us_per_delta[{name}]": us for name, us in per_delta.items()}
    return Report(
        "1. Runtime CPU per streamed delta",
        ".venv/bin/python -m bench --only delta",
        markdown,
        checks,
        figures,
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
