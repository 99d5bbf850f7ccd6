"""The benchmark suite: runs every benchmark and writes ``bench/RESULTS.md``.

Run from the project root::

    .venv/bin/python -m bench                    # everything, writes bench/RESULTS.md
    .venv/bin/python -m bench --quick            # a tiny version of each, prints only
    .venv/bin/python -m bench --only delta,turn  # some of them, merged into RESULTS.md
    .venv/bin/python bench/run_all.py ...        # the same

``--quick`` is the smoke mode CI runs (``tests/bench/test_bench_smoke.py``); its numbers
are not meaningful and it writes nothing unless ``--output`` names a file. See
``docs/benchmarks.md`` for what each benchmark measures.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Check, Report, table, verdict  # noqa: E402
from bench._machine import describe, load  # noqa: E402
from bench._merge import merge  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
BENCHMARKS = {
    "delta": "bench.bench_delta",
    "wire": "bench.bench_wire",
    "turn": "bench.bench_turn",
    "concurrency": "bench.bench_concurrency",
    "scaling": "bench.bench_scaling",
    "chunk_parse": "bench.bench_chunk_parse",
    "store": "bench.bench_store",
    "first_call": "bench.bench_first_call",
    "transport": "bench.bench_transport",
    "session_growth": "bench.bench_session_growth",
    "construction": "bench.bench_construction",
    "sessions": "bench.bench_sessions",
    "store_open": "bench.bench_store_open",
    "heap": "bench.bench_heap",
}


def runner(name: str) -> Callable[[bool], Report]:
    """The ``run(quick)`` function of a benchmark."""
    module = importlib.import_module(BENCHMARKS[name])
    run: Callable[[bool], Report] = getattr(module, "suite_run", None) or module.run
    return run


def run_one(name: str, quick: bool) -> Report:
    started = time.perf_counter()
    try:
        report = runner(name)(quick)
    except Exception:
        failure = traceback.format_exc()
        print(failure, file=sys.stderr)
        report = Report(
            f"{name} (failed)",
            f".venv/bin/python -m bench --only {name}",
            f"The benchmark failed:\n\n```\n{failure}```",
            [Check(name, "ran", "failed", "runs", False)],
        )
    report.figures["seconds"] = time.perf_counter() - started
    return report


def render(
    reports: list[Report],
    machine: list[str],
    command: str,
    stamps: dict[str, str] | None = None,
) -> str:
    checks = [check for report in reports for check in report.checks]
    summary = [
        (c.benchmark, c.metric, c.value, c.target, verdict(c.met)) for c in checks if c.target
    ]
    met = sum(1 for c in checks if c.met)
    judged = sum(1 for c in checks if c.met is not None)
    lines = [
        "# Benchmark results",
        "",
        f"Written by `{command}`; re-run it to refresh this file. What each benchmark",
        "measures, and how to read it: `docs/benchmarks.md`.",
        "",
        "## Machine",
        "",
        *machine,
        "",
        f"## Targets ({met} of {judged} met)",
        "",
        table(["benchmark", "metric", "measured", "target", "verdict"], summary, left=5),
    ]
    for report in reports:
        seconds = report.figures.get("seconds", 0.0)
        stamp = (stamps or {}).get(report.title)
        lines += [
            "",
            f"## {report.title}",
            "",
            f"Command: `{report.command}` ({seconds:.0f} s" + (f"; {stamp})" if stamp else ")"),
            "",
            report.markdown.strip(),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the agent_lab benchmark suite.")
    parser.add_argument("--quick", action="store_true", help="tiny versions (smoke mode)")
    parser.add_argument("--only", default="", help=f"comma-separated: {', '.join(BENCHMARKS)}")
    parser.add_argument("--output", type=Path, default=None, help="where to write the report")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    command = ".venv/bin/python -m bench" + (" --quick" if args.quick else "")
    if args.only:
        command += f" --only {args.only}"
    machine_before = describe()
    reports, stamps = [], {}
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        started = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load()}"
        reports.append(run_one(name, args.quick))
        stamps[reports[-1].title] = f"run {started} → {load()}"
    text = render(reports, machine_before + describe(load_only=True), command, stamps)
    print(text)
    output = args.output or (None if args.quick else RESULTS)
    if output is not None:
        if args.only and output.exists():  # keep the sections of the other benchmarks
            text = merge(output.read_text(encoding="utf-8"), text)
        output.write_text(text, encoding="utf-8")
        print(f"wrote {output}", file=sys.stderr)
    failed = [r.title for r in reports if r.title.endswith("(failed)")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
