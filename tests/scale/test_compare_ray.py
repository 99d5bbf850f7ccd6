"""``compare --executor ray``: the same campaign locally and on a local Ray instance."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_lab.interfaces.cli.common import open_lab
from agent_lab.interfaces.cli.compare import (
    SESSION_METRICS,
    SessionRun,
    run_scenario,
    scenario_settings,
    summarize_runs,
)
from agent_lab.interfaces.cli.compare_ray import campaign_jobs, run_on_ray, task_settings
from agent_lab.interfaces.settings import LabSettings, load_settings
from agent_lab.scenarios import Scenario, load_scenario

pytestmark = pytest.mark.scale

REPEAT = 2


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    # The instance listens on loopback only: the suite's offline guard, which Ray's
    # own Python processes inherit, refuses this machine's outside address. Ray reads
    # the switch ("not a cluster node": use 127.0.0.1) when it is first imported.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            node_ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call,unused-ignore]
            assert node_ip == "127.0.0.1", f"the Ray instance listens on {node_ip}"
            yield
        finally:
            ray.shutdown()


def _settings(home: Path, scenario: Scenario, **extra: str) -> LabSettings:
    settings = load_settings(environ={"AGENT_LAB_HOME": str(home), **extra})
    return scenario_settings(settings, scenario, fast=True)


async def _local(settings: LabSettings, scenario: Scenario) -> list[SessionRun]:
    async with open_lab(settings) as lab:
        return [await run_scenario(lab, scenario, job.mode)
                for job in campaign_jobs(scenario, REPEAT)]  # fmt: skip


async def _on_ray(settings: LabSettings, scenario: Scenario) -> tuple[list[SessionRun], Any]:
    async with open_lab(settings) as lab:
        shared = task_settings(settings, lab.base_url, lab.model)
        runs = await run_on_ray(shared, scenario, REPEAT, merge_into=lab.store)
        assert lab.store is not None
        stored = {run.session_id: _shape(lab.store, run.session_id) for run in runs}
    return runs, stored


def _shape(store: Any, session_id: str | None) -> list[tuple[Any, ...]]:
    """What a session's transcript holds, without ids and timestamps."""
    return [
        (m["turn_index"], m["role"], m["name"], [c["name"] for c in m["tool_calls"]])
        for m in store.list_messages(session_id)
    ]


def _facts(run: SessionRun) -> tuple[Any, ...]:
    """A run apart from its timings (the report's counts, statuses and errors)."""
    turns = [(t.turn_index, t.status, t.round_count, t.model_calls, t.tool_count,
              t.fallback_count) for t in run.turns]  # fmt: skip
    return run.mode, turns, run.errors


def test_a_campaign_on_ray_reports_what_the_local_executor_reports(
    tmp_path: Path, ray_instance: None
) -> None:
    scenario = load_scenario("demo")
    local_runs = asyncio.run(_local(_settings(tmp_path / "local", scenario), scenario))
    ray_runs, stored = asyncio.run(_on_ray(_settings(tmp_path / "ray", scenario), scenario))

    assert [_facts(run) for run in ray_runs] == [_facts(run) for run in local_runs]
    local_stats = summarize_runs(local_runs, scenario.modes)
    ray_stats = summarize_runs(ray_runs, scenario.modes)
    # Token totals are not compared, as latencies are not: the simulated model words
    # its answers from a digest of the request, which holds the random entry ids the
    # tools return, so they vary by a few tokens from session to session whichever
    # executor runs them; cached tokens also depend on which sessions the provider
    # saw first.
    for mode in scenario.modes:
        for label, _ in SESSION_METRICS:
            if "tokens" in label:
                continue
            assert ray_stats[mode][label] == local_stats[mode][label], (mode, label)
    assert not any(run.errors for run in ray_runs)

    # Every Ray session was merged into the lab's store, whole.
    async def local_shapes() -> list[Any]:
        async with open_lab(_settings(tmp_path / "local", scenario)) as lab:
            return [_shape(lab.store, run.session_id) for run in local_runs]

    assert [stored[run.session_id] for run in ray_runs] == asyncio.run(local_shapes())
    assert all(len(shape) > 0 for shape in stored.values())
