"""``agent-lab compare``: a scenario in both modes, N times, with a written report."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_lab.interfaces.cli.common import (
    notice,
    open_lab,
    run_async,
    stdout_console,
)
from agent_lab.interfaces.cli.compare import (
    SessionRun,
    cold_left_out,
    exit_code,
    load_for_run,
    report_failures,
    run_scenario,
    summarize_runs,
)
from agent_lab.interfaces.cli.compare_report import (
    CompareResult,
    ReportFiles,
    left_out_note,
    stats_rows,
    write_report,
)
from agent_lab.interfaces.cli.driver import TurnEnd, TurnHooks
from agent_lab.interfaces.cli.flags import ENDPOINT_FLAGS, STORE_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.render import metric_table
from agent_lab.scenarios import Scenario, bundled_scenarios

if TYPE_CHECKING:
    from agent_lab.interfaces.lab import Lab

Executor = Literal["local", "ray"]
_INDENT = orjson.OPT_INDENT_2

COMPARE_HELP = f"""Run a scenario's user turns in both tool modes, N times, and compare them.

Prints the median and p90 of visible TTFT, provider TTFT and turn wall time (per
turn) and of tokens, model calls, fallbacks and tools (per session), then writes a
Markdown report and an HTML page with a latency plot into --out (default: a
`reports` folder next to the database). SCENARIO is a TOML file (see
docs/scenarios.md) or a bundled name: {", ".join(bundled_scenarios())}.

Examples:

  agent-lab compare demo

  agent-lab compare demo --repeat 5 --out ./reports   # sessions titled [compare demo #N]

  agent-lab compare demo --fast --json | jq .stats

  agent-lab compare my-scenario.toml --base-url http://127.0.0.1:8000/v1 --model qwen2.5

  agent-lab compare demo --repeat 50 --executor ray   # each repeat a Ray task
"""


@lab_flags(
    "scenario",
    "repeat",
    "out",
    *ENDPOINT_FLAGS,
    "event_model",
    "config",
    *STORE_FLAGS,
    "fast",
    "local",
    "as_json",
    "executor",
)
def compare(
    options: LabOptions,
    scenario: Annotated[
        str, typer.Argument(help="A scenario TOML file or a bundled scenario name.")
    ],
    repeat: Annotated[
        int, typer.Option("--repeat", "-n", min=1, max=1000, help="Sessions per mode.")
    ] = 1,
    out: Annotated[
        Path | None,
        typer.Option("--out", file_okay=False, help="Report folder.", show_default=False),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the statistics, sessions and report files as JSON."),
    ] = False,
    executor: Annotated[
        Executor,
        typer.Option(
            "--executor", help="local: one session at a time; ray: each repeat a Ray task."
        ),
    ] = "local",
) -> None:
    """Compare both modes on a scenario (see ``COMPARE_HELP``)."""
    run_async(lambda: _compare(options, scenario, repeat, out, as_json=as_json, executor=executor))


async def _compare(
    options: LabOptions,
    name: str,
    repeat: int,
    out: Path | None,
    *,
    as_json: bool,
    executor: Executor = "local",
) -> int:
    scenario, settings = load_for_run(options, name)
    console = stdout_console()
    started = datetime.now()
    async with open_lab(settings) as lab:
        if not as_json:
            notice(console, lab.endpoint_description)
        if executor == "ray":
            runs = await _run_on_ray(lab, scenario, repeat, console, quiet=as_json)
        else:
            runs = await _run_all(lab, scenario, repeat, console, quiet=as_json)
        endpoint = lab.endpoint_description
    result = CompareResult(
        scenario=scenario,
        endpoint=endpoint,
        repeat=repeat,
        modes=scenario.modes,
        runs=runs,
        stats=summarize_runs(runs, scenario.modes),
        started_at=started,
    )
    files = write_report(result, out or settings.database().parent / "reports")
    if as_json:
        sys.stdout.write(orjson.dumps(result_document(result, files), option=_INDENT).decode())
        sys.stdout.write("\n")
    else:
        rows = stats_rows(result)
        console.print(metric_table(f"{scenario.name}: median / p90", scenario.modes, rows))
        if note := left_out_note(result):
            console.print(note, markup=False, highlight=False)
        console.print(f"report: {files.markdown}\n        {files.html}")
    report_failures(runs)
    return exit_code(runs)


def result_document(result: CompareResult, files: ReportFiles) -> dict[str, Any]:
    """``compare --json``: per mode the median, p90 and count of every metric."""
    return {
        "scenario": result.scenario.name,
        "endpoint": result.endpoint,
        "repeat": result.repeat,
        "modes": list(result.modes),
        "stats": {
            mode: {label: stats.as_json(label) for label, stats in result.stats[mode].items()}
            for mode in result.modes
        },
        "cold_left_out": [
            {"repetition": repetition, "turn_index": turn}
            for repetition, turn in cold_left_out(result.runs, result.modes)
        ],
        "sessions": [
            {
                "mode": run.mode,
                "session_id": run.session_id,
                "errors": run.errors,
                "cold_turns": [turn.turn_index for turn in run.turns if turn.cold],
                "cost_usd_per_turn": [turn.cost_usd for turn in run.turns],
            }
            for run in result.runs
        ],
        "report": {
            "markdown": str(files.markdown),
            "html": str(files.html),
            "plot": str(files.plot),
        },
    }


async def _run_all(
    lab: Lab, scenario: Scenario, repeat: int, console: Console, *, quiet: bool = False
) -> list[SessionRun]:
    total = repeat * len(scenario.modes) * len(scenario.turns)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    runs: list[SessionRun] = []
    with Progress(*columns, console=console, disable=quiet) as progress:
        task = progress.add_task("turns", total=total)

        def after_turn(end: TurnEnd) -> None:
            progress.advance(task)

        for index in range(repeat):
            # Alternate the order, so a cold start does not always land on one mode.
            modes = scenario.modes if index % 2 == 0 else list(reversed(scenario.modes))
            for mode in modes:
                progress.update(task, description=f"{mode} #{index + 1}")
                tag = f"[compare {scenario.name} #{index + 1}]"
                hooks = TurnHooks(after_turn=after_turn)
                cold = not runs  # the first session makes the process's first model call
                run = await run_scenario(lab, scenario, mode, hooks, tag=tag, cold_start=cold)
                runs.append(run)
        progress.update(task, completed=total, description="done")
    return runs


async def _run_on_ray(
    lab: Lab, scenario: Scenario, repeat: int, console: Console, *, quiet: bool = False
) -> list[SessionRun]:
    from agent_lab.interfaces.cli.compare_ray import run_on_ray, task_settings

    total = repeat * len(scenario.modes)
    with Progress(TextColumn("sessions on Ray"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=quiet) as progress:  # fmt: skip
        task = progress.add_task("sessions", total=total)
        return await run_on_ray(
            task_settings(lab.settings, lab.base_url, lab.model),
            scenario,
            repeat,
            merge_into=lab.store,
            on_done=lambda run: progress.advance(task),
        )
