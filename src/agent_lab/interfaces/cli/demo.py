"""``agent-lab demo``: the bundled scenario once in each mode, offline, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent_lab.interfaces.cli.common import (
    notice,
    open_lab,
    run_async,
    stdout_console,
)
from agent_lab.interfaces.cli.compare import (
    MetricStats,
    SessionRun,
    exit_code,
    load_for_run,
    report_failures,
    run_scenario,
)
from agent_lab.interfaces.cli.driver import TurnEnd, TurnHooks
from agent_lab.interfaces.cli.flags import STORE_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.render import ConversationRenderer, metric_table, tokens_text

DEMO_HELP = """Run the bundled demo conversation in both tool modes, offline, and compare them.

The conversation adjusts the volume, schedules a meeting, searches the local corpus
and says goodbye, once in dual_agent and once in chat_agent_tools mode, against the
built-in simulated model (any configured endpoint is ignored; --local uses the
bundled small model instead). Both sessions are saved in the data directory's
database. Tools run on a scratch copy of their state, so your notes and calendar are
untouched.

Examples:

  agent-lab demo

  agent-lab demo --fast                   # no simulated latency (CI)

  agent-lab demo --home /tmp/lab          # a separate data directory
"""


@lab_flags("fast", *STORE_FLAGS, "local", offline=True)
def demo(options: LabOptions) -> None:
    """Run the bundled demo scenario in both modes (see ``DEMO_HELP``)."""
    run_async(lambda: _demo(options))


async def _demo(options: LabOptions) -> int:
    scenario, settings = load_for_run(options, "demo")
    console = stdout_console()
    runs: list[SessionRun] = []
    async with open_lab(settings) as lab:
        notice(console, lab.endpoint_description)
        for mode in scenario.modes:
            console.rule(f"[bold]{mode}")
            cold = not runs  # the first session makes the first model call
            runs.append(await run_scenario(lab, scenario, mode, _live(console), cold_start=cold))
    console.print()
    console.print(demo_table(runs))
    _print_next_steps(console, runs, options)
    report_failures(runs)
    return exit_code(runs)


def _live(console: Console) -> TurnHooks:
    renderer = ConversationRenderer(console)

    def after_turn(end: TurnEnd) -> None:
        renderer.note(end.describe(), "red" if end.error else "dim")

    return TurnHooks(renderer.render, renderer.user, after_turn)


def demo_table(runs: Sequence[SessionRun]) -> Table:
    """One column per mode: visible TTFT, rounds, calls, tools, tokens, wall time."""
    rows = [
        ("visible TTFT (median ms)", [_ms(_median(run, "visible_ttft_ms")) for run in runs]),
        ("provider TTFT (median ms)", [_ms(_median(run, "provider_ttft_ms")) for run in runs]),
        ("rounds", [str(sum(turn.round_count or 0 for turn in run.turns)) for run in runs]),
        ("model calls", [str(run.totals.get("model_calls", 0)) for run in runs]),
        ("fallback calls", [str(run.totals.get("fallback_count", 0)) for run in runs]),
        ("tool count", [str(run.totals.get("tool_count", 0)) for run in runs]),
        ("tokens (cached)", [_tokens(run) for run in runs]),
        ("turn wall time (median ms)", [_ms(_median(run, "wall_time_ms")) for run in runs]),
        ("session wall time (ms)", [str(run.totals.get("turn_wall_time_ms", 0)) for run in runs]),
    ]
    return metric_table("dual_agent vs chat_agent_tools", [run.mode for run in runs], rows)


def _median(run: SessionRun, name: str) -> float | None:
    return MetricStats.of(getattr(turn, name) for turn in run.turns).median


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _tokens(run: SessionRun) -> str:
    return tokens_text(run.totals)


def _print_next_steps(console: Console, runs: Sequence[SessionRun], options: LabOptions) -> None:
    console.print()
    for run in runs:
        console.print(f"  {run.mode:<18} session [bold]{run.session_id}[/bold]")
        for error in run.errors:
            console.print(f"  {'':<18} [red]{error}[/red]")
    where = _store_flags(options)
    console.print("\nOpen them with:")
    console.print(f"  agent-lab sessions show ID{where}   # transcript, metrics, audit timeline")
    console.print(f"  agent-lab replay ID{where}          # re-run against the recorded chunks")
    console.print(f"  agent-lab serve{where}              # the web lab")


def _store_flags(options: LabOptions) -> str:
    flags = ""
    if options.home is not None:
        flags += f" --home {_quoted(options.home)}"
    if options.db is not None:
        flags += f" --db {_quoted(options.db)}"
    return flags


def _quoted(path: Path) -> str:
    text = str(path)
    return f"'{text}'" if any(char.isspace() for char in text) else text
