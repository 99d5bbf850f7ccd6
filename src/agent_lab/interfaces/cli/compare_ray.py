"""``agent-lab compare --executor ray``: every repeat of a campaign is a Ray task.

``ray.init()`` starts a local Ray instance (one worker per CPU) unless ``RAY_ADDRESS``
names a cluster to join. Each task runs one scenario session in one mode on its own
simulated or configured endpoint and returns the ``SessionRun`` the report is built
from. With a PostgreSQL store (``AGENT_LAB_DATABASE_URL``) the task writes its session
straight into the shared database; otherwise it runs on a scratch SQLite store in the
worker and its session comes back as an export (``session_transfer``) merged into the
lab's store. The runs are returned in the local executor's order, so the report is
the same whichever executor ran it, apart from its timings.

The nodes of a cluster need Agent Lab (with the ``ray`` extra) installed in the same
Python version as the driver.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.store_factory import is_postgres_url
from agent_lab.interfaces.cli.common import open_lab
from agent_lab.interfaces.cli.compare import SessionRun, run_scenario
from agent_lab.interfaces.cli.session_transfer import SessionExport, export_session, merge_session
from agent_lab.interfaces.settings import LabSettings
from agent_lab.scenarios import Scenario

__all__ = ["RepeatJob", "campaign_jobs", "run_on_ray", "run_repeat"]


@dataclass(frozen=True)
class RepeatJob:
    """One session of a campaign: the repeat's index and its mode."""

    index: int
    mode: ToolInvocationMode


@dataclass(frozen=True)
class RepeatOutcome:
    """What a task sends back: the run, and its session unless it is in a shared store."""

    run: SessionRun
    export: SessionExport | None


def campaign_jobs(scenario: Scenario, repeat: int) -> list[RepeatJob]:
    """The sessions of a campaign in the local executor's order (modes alternate)."""
    jobs: list[RepeatJob] = []
    for index in range(repeat):
        modes = scenario.modes if index % 2 == 0 else list(reversed(scenario.modes))
        jobs.extend(RepeatJob(index, mode) for mode in modes)
    return jobs


def run_repeat(settings: LabSettings, scenario: Scenario, job: RepeatJob) -> RepeatOutcome:
    """Run one session of the campaign in this process (the body of a Ray task)."""
    shared = is_postgres_url(settings.store_location())
    with tempfile.TemporaryDirectory(prefix="agent-lab-repeat-") as scratch:
        if not shared:
            settings = settings.model_copy(
                update={"db_path": Path(scratch) / "repeat.sqlite3", "home": Path(scratch)}
            )
        return asyncio.run(_run(settings, scenario, job.mode, export=not shared))


async def _run(
    settings: LabSettings, scenario: Scenario, mode: ToolInvocationMode, *, export: bool
) -> RepeatOutcome:
    async with open_lab(settings) as lab:
        run = await run_scenario(lab, scenario, mode)
        records = None
        if export and run.session_id is not None and lab.store is not None:
            records = await asyncio.to_thread(export_session, lab.store, run.session_id)
    return RepeatOutcome(run, records)


def task_settings(settings: LabSettings, base_url: str | None, model: str) -> LabSettings:
    """The settings a task opens its lab with.

    With the simulated model on a local Ray instance, the tasks use the driver's
    simulated provider (``base_url``), so every session meets one provider and its
    prompt cache, as in a local run. On a cluster (``RAY_ADDRESS``) each task starts
    its own simulator, since the driver's loopback address is not reachable there.
    """
    if settings.simulated and base_url and not os.environ.get("RAY_ADDRESS"):
        return settings.model_copy(update={"base_url": base_url, "model": model})
    return settings


def _init_ray(num_cpus: int | None) -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"--executor ray needs the ray extra: pip install 'agent-lab[ray]' ({exc})"
        ) from None
    if not ray.is_initialized():
        # RAY_ADDRESS (if set) joins a cluster; otherwise a local instance starts.
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


def _gather(
    settings: LabSettings,
    scenario: Scenario,
    jobs: Sequence[RepeatJob],
    num_cpus: int | None,
    on_done: Callable[[SessionRun], None],
) -> list[RepeatOutcome]:
    ray = _init_ray(num_cpus)
    task = ray.remote(num_cpus=1, max_retries=0)(run_repeat)
    settings_ref, scenario_ref = ray.put(settings), ray.put(scenario)
    refs = [task.remote(settings_ref, scenario_ref, job) for job in jobs]
    outcomes: dict[Any, RepeatOutcome] = {}
    waiting = list(refs)
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1)
        for ref in done:
            outcomes[ref] = ray.get(ref)
            on_done(outcomes[ref].run)
    return [outcomes[ref] for ref in refs]


async def run_on_ray(
    settings: LabSettings,
    scenario: Scenario,
    repeat: int,
    *,
    merge_into: Any = None,
    num_cpus: int | None = None,
    on_done: Callable[[SessionRun], None] = lambda run: None,
) -> list[SessionRun]:
    """Run the campaign's sessions as Ray tasks; return the runs in the local order.

    Args:
        settings: The lab settings every task opens its lab with.
        scenario: The scenario of every session.
        repeat: Sessions per mode.
        merge_into: The store the sessions of a non-shared store are merged into.
        num_cpus: CPUs of a local Ray instance (default: all of them).
        on_done: Called in a worker thread with each run as it finishes.

    Raises:
        ConfigError: the ``ray`` extra is not installed, or ``--local`` was asked.
    """
    if settings.local:
        raise ConfigError("--executor ray cannot share one --local model; use --base-url")
    jobs = campaign_jobs(scenario, repeat)
    outcomes = await asyncio.to_thread(_gather, settings, scenario, jobs, num_cpus, on_done)
    for outcome in outcomes:
        if outcome.export is not None and merge_into is not None:
            await asyncio.to_thread(merge_session, merge_into, outcome.export)
    return [outcome.run for outcome in outcomes]
