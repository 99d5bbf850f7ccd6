"""Benchmark 6: what it costs to build a runtime with the default tools.

Run from the project root::

    .venv/bin/python -m bench --only construction
    .venv/bin/python -m bench.bench_construction [--quick]

A server builds one ``DebugRuntime`` per session, so construction is paid once per
conversation, often in bursts. We time, in process CPU per construction (median of
several runs of N constructions each, interleaved so all cases share the machine):

* the floor: ``DebugRuntime(client, registry=ToolRegistry())``, a runtime without tools;
* ``build_default_tool_registry()`` alone;
* ``DebugRuntime(client)``: the runtime with the default tools, as a server builds it;
* ``DebugRuntime(client, registry=shared)``: one registry handed to every runtime.

The first construction of a fresh process is reported too (``agent_lab`` already
imported): it pays once for importing the tool adapters and checking the built-in
schemas against the meta-schema.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable

from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from bench._common import (
    Check,
    ListClient,
    Report,
    fresh_process_json,
    interleaved,
    median,
    table,
)

TARGET_MS = 0.2
LABELS = (
    "floor: DebugRuntime(client, registry=ToolRegistry())",
    "build_default_tool_registry()",
    "DebugRuntime(client) (default tools)",
    "DebugRuntime(client, registry=shared)",
)
_COLD_SCRIPT = """
import time
from agent_lab.application.runtime import DebugRuntime
from bench._common import ListClient
client = ListClient([])
started = time.process_time()
DebugRuntime(client)
print((time.process_time() - started) * 1000)
"""


def _per_call_ms(build: Callable[[], object], count: int) -> Callable[[], float]:
    def case() -> float:
        started = time.process_time()
        for _ in range(count):
            build()
        return (time.process_time() - started) * 1000 / count

    return case


def cold_first_construction_ms() -> float:
    """CPU ms of the first ``DebugRuntime(client)`` of a fresh process (package imported)."""
    return float(fresh_process_json(["-c", _COLD_SCRIPT], timeout=120))


def measure(count: int, runs: int) -> dict[str, float]:
    client = ListClient([])
    shared = build_default_tool_registry()
    cases = {
        LABELS[0]: _per_call_ms(lambda: DebugRuntime(client, registry=ToolRegistry()), count),
        LABELS[1]: _per_call_ms(build_default_tool_registry, count),
        LABELS[2]: _per_call_ms(lambda: DebugRuntime(client), count),
        LABELS[3]: _per_call_ms(lambda: DebugRuntime(client, registry=shared), count),
    }
    samples = interleaved(cases, runs)
    return {label: median(values) for label, values in samples.items()}


def run(quick: bool = False) -> Report:
    count, runs = (20, 1) if quick else (500, 7)
    previous = os.environ.get("AGENT_LAB_HOME")
    with tempfile.TemporaryDirectory(prefix="agent-lab-bench-") as home:
        os.environ["AGENT_LAB_HOME"] = home
        try:
            figures = measure(count, runs)
            cold = cold_first_construction_ms()
        finally:
            if previous is None:
                os.environ.pop("AGENT_LAB_HOME", None)
            else:
                os.environ["AGENT_LAB_HOME"] = previous
    default = figures[LABELS[2]]
    return Report(
        "6. Runtime construction with the default tools",
        ".venv/bin/python -m bench --only construction",
        _markdown(figures, cold, (count, runs)),
        [
            Check(
                "6 construction",
                "CPU ms per DebugRuntime(client), default tools",
                f"{default:.4f}",
                f"≤ {TARGET_MS:g}",
                default <= TARGET_MS,
            )
        ],
        {f"cpu_ms[{label}]": value for label, value in figures.items()}
        | {"cold_first_construction_ms": cold},
    )


def _markdown(figures: dict[str, float], cold: float, shape: tuple[int, int]) -> str:
    count, runs = shape
    floor = figures[LABELS[0]]
    rows = [
        (label, f"{value:.4f}", f"{value / floor:.1f}×" if floor > 0 else "–")
        for label, value in figures.items()
    ]
    return "\n".join(
        [
            f"{count} constructions per run, median of {runs} interleaved runs, process CPU.",
            "",
            table(["case", "CPU ms / construction", "÷ floor"], rows),
            "",
            f"First `DebugRuntime(client)` of a fresh process (`agent_lab.application.runtime` "
            f"already imported; the tool adapters' first import and the one-time schema "
            f"checks included): **{cold:.2f} ms** CPU.",
        ]
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
