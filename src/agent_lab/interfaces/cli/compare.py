"""Run a scenario in both tool modes and compare their metrics (``demo``, ``compare``).

Every scenario session is persisted in the lab's store like any other, and runs its
tools on a fresh temporary data directory, so both modes (and every repetition) start
from the same tool state and the user's own notes, calendar and volume are untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_lab.application.contracts import DebugRunRequest, ToolInvocationMode
from agent_lab.application.pricing import CostBreakdown, PriceTable, cost_breakdown
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ConfigError
from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    print_error,
    run_failure,
    scratch_registry,
)
from agent_lab.interfaces.cli.compare_stats import (
    COST_METRIC,
    SESSION_METRICS,
    TOKEN_METRICS,
    TURN_METRICS,
    WARM_METRICS,
    MetricStats,
    TokenTotal,
    percentile,
)
from agent_lab.interfaces.cli.driver import SessionDriver, TurnEnd, TurnHooks, drive_turns
from agent_lab.interfaces.cli.lab_options import LabOptions, fast_from_env
from agent_lab.interfaces.settings import LabSettings
from agent_lab.scenarios import Scenario, load_scenario

if TYPE_CHECKING:
    from agent_lab.interfaces.lab import Lab

__all__ = [
    "COST_METRIC",
    "SESSION_METRICS",
    "WARM_METRICS",
    "TURN_METRICS",
    "MetricStats",
    "SessionRun",
    "TurnSample",
    "cold_left_out",
    "exit_code",
    "report_failures",
    "load_for_run",
    "percentile",
    "run_scenario",
    "scenario_request",
    "scenario_settings",
    "summarize_runs",
]


@dataclass(frozen=True)
class TurnSample:
    """The measurements of one turn of a scenario session."""

    turn_index: int
    status: str
    round_count: int | None
    visible_ttft_ms: int | None
    """From submitting the user message to its first visible text."""
    provider_ttft_ms: int | None
    """The first chat call's time to its first chunk."""
    wall_time_ms: int | None
    model_calls: int = 0
    fallback_count: int = 0
    tool_count: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    """The turn's model calls in US dollars; ``None`` when any of them is unpriced."""
    cold: bool = False
    """The turn made the first model call of the process (client warm-up, connect)."""


@dataclass(frozen=True)
class SessionRun:
    """One scenario session in one mode: its id, turns and ``usage_summary``."""

    mode: ToolInvocationMode
    session_id: str | None
    turns: list[TurnSample]
    summary: Mapping[str, Any]
    errors: list[str] = field(default_factory=list)
    """The failed turns' error messages, as the runtime gave them."""
    failures: list[tuple[int, str]] = field(default_factory=list)
    """The failed turns' exit codes and one-line reasons, as ``run`` would print them."""

    @property
    def totals(self) -> Mapping[str, Any]:
        """The ``session`` part of the usage summary."""
        session: Mapping[str, Any] = self.summary.get("session") or {}
        return session


def load_for_run(options: LabOptions, name: str) -> tuple[Scenario, LabSettings]:
    """The scenario ``name`` (a bundled name or a TOML file) and the settings its sessions
    run with: the command's, with the scenario's simulated latency unless ``--fast`` or
    ``AGENT_LAB_SIM_FAST`` asks for none.

    Raises:
        ConfigError: an unknown or invalid scenario, or bad settings.
    """
    scenario = load_scenario(name)
    fast = options.fast or fast_from_env()
    return scenario, scenario_settings(options.settings(), scenario, fast=fast)


def exit_code(runs: Sequence[SessionRun]) -> int:
    """The exit code of a command that ran scenario sessions: ``EXIT_OK`` when no turn
    failed, else the highest code of its failed turns (a rejected key or an unknown
    endpoint is a usage error, as in ``run``)."""
    return max((code for run in runs for code, _ in run.failures), default=EXIT_OK)


def report_failures(runs: Sequence[SessionRun]) -> None:
    """One ``error:`` line on stderr per distinct reason turns failed for, with how many
    of the campaign's turns it took."""
    turns = sum(len(run.turns) for run in runs)
    counts: dict[str, int] = {}
    for run in runs:
        for _, line in run.failures:
            counts[line] = counts.get(line, 0) + 1
    for line, count in counts.items():
        print_error(f"{count} of {turns} turns failed: {line}")


def scenario_settings(settings: LabSettings, scenario: Scenario, *, fast: bool) -> LabSettings:
    """The lab settings with the scenario's simulated-model latency (unless ``fast``)."""
    latency = scenario.simulated
    update: dict[str, Any] = {}
    if fast:
        update = {"simulated_ttft_ms": 0.0, "simulated_tokens_per_second": 0.0}
    else:
        if latency.ttft_ms is not None:
            update["simulated_ttft_ms"] = latency.ttft_ms
        if latency.tokens_per_second is not None:
            update["simulated_tokens_per_second"] = latency.tokens_per_second
    return settings.model_copy(update=update)


def scenario_request(lab: Lab, scenario: Scenario, mode: ToolInvocationMode) -> DebugRunRequest:
    """The request of a scenario session in ``mode``; its first turn is the first message.

    Raises:
        ConfigError: the scenario enables a tool the lab does not have.
    """
    request = lab.request(scenario.turns[0], mode=mode)
    override = scenario.overrides.get(mode)
    prompts = (override and override.system_prompts) or scenario.system_prompts
    tools = (override and override.tools) or scenario.tools
    loops = override.max_event_loops if override and override.max_event_loops is not None else None
    loops = loops if loops is not None else scenario.max_event_loops
    event_agent: dict[str, Any] = {}
    if tools is not None:
        _check_tools(lab, tools)
        event_agent["enabled_tools"] = list(dict.fromkeys(tools))
    if loops is not None:
        event_agent["max_event_loops"] = loops
    update: dict[str, Any] = {
        "event_agent": request.event_agent.model_copy(update=event_agent),
    }
    if prompts is not None:
        update["system_prompts"] = list(prompts)
    if override and override.temperature is not None:
        update["chat_agent"] = request.chat_agent.model_copy(
            update={"temperature": override.temperature}
        )
    return request.model_copy(update=update)


def _check_tools(lab: Lab, tools: Iterable[str]) -> None:
    unknown = [name for name in tools if name not in lab.registry]
    if unknown:
        known = ", ".join(lab.registry.names())
        raise ConfigError(f"unknown tool(s) in scenario: {', '.join(unknown)} (known: {known})")


async def run_scenario(
    lab: Lab,
    scenario: Scenario,
    mode: ToolInvocationMode,
    hooks: TurnHooks | None = None,
    *,
    tag: str | None = None,
    cold_start: bool = False,
) -> SessionRun:
    """Run every user turn of ``scenario`` as one persisted session in ``mode``.

    A turn starts once the previous one ended; a tool that terminates the session ends
    the scenario early. A ``tag`` such as ``[compare demo #3]`` goes in front of the
    session's title, so repeated sessions stay apart in ``agent-lab sessions list``.
    ``cold_start``: this session makes the process's first model call, so its first
    turn is flagged cold.
    """
    hooks = hooks or TurnHooks()
    request = scenario_request(lab, scenario, mode)
    assert lab.chat_client is not None and lab.store is not None
    if tag is not None:
        snapshot = request.model_dump(mode="json", exclude={"user_message", "session_id"})
        title = f"{tag} {' '.join(request.user_message.split())}"
        session_id = await asyncio.to_thread(lab.store.create_session, title, snapshot)
        request = request.model_copy(update={"session_id": session_id})
    with scratch_registry() as registry:
        runtime = DebugRuntime(lab.chat_client, registry=registry, session_store=lab.store)
        driver = SessionDriver(runtime, hooks.observer)
        try:
            ends = await drive_turns(driver, request, scenario.turns, hooks)
        finally:
            await driver.aclose()
    summary = lab.store.usage_summary(driver.session_id) if driver.session_id else {}
    failed = [end.error for end in ends if end.error]
    samples = turn_samples(ends, summary, lab.prices, cold_start=cold_start)
    errors = [str(error["message"]) for error in failed]
    failures = [run_failure(error) for error in failed]
    return SessionRun(mode, driver.session_id, samples, summary, errors, failures)


def turn_samples(
    ends: Sequence[TurnEnd],
    summary: Mapping[str, Any],
    prices: PriceTable | None = None,
    *,
    cold_start: bool = False,
) -> list[TurnSample]:
    """Join the live turn ends with the persisted per-turn metrics and costs.

    With ``cold_start`` the first turn is flagged ``cold``: it made the process's first
    model call, whose time includes client warm-up and connection setup.
    """
    costs = cost_breakdown(summary.get("calls") or [], prices) if prices else None
    first = min((end.turn_index for end in ends if end.turn_index is not None), default=None)
    persisted = {turn["turn_index"]: turn for turn in summary.get("turns") or []}
    provider_ttft = _first_chat_ttfts(summary.get("calls") or [])
    samples = []
    for end in ends:
        if end.turn_index is None:
            continue
        turn = persisted.get(end.turn_index, {})
        samples.append(
            TurnSample(
                turn_index=end.turn_index,
                status=end.status,
                round_count=end.round_count
                if end.round_count is not None
                else turn.get("round_count"),
                visible_ttft_ms=end.visible_ttft_ms,
                provider_ttft_ms=provider_ttft.get(end.turn_index),
                wall_time_ms=turn.get("turn_wall_time_ms"),
                model_calls=int(turn.get("model_calls", 0)),
                fallback_count=int(turn.get("fallback_count", 0)),
                tool_count=int(turn.get("tool_count", 0)),
                total_tokens=int(turn.get("total_tokens", 0)),
                cached_tokens=int(turn.get("cached_tokens", 0)),
                cost_usd=_turn_cost(costs, end.turn_index),
                cold=cold_start and end.turn_index == first,
            )
        )
    return samples


def _first_chat_ttfts(calls: Sequence[Mapping[str, Any]]) -> dict[int, Any]:
    """The provider TTFT of each turn's first chat call, by turn."""
    return {
        call["turn_index"]: call.get("ttft_ms")
        for call in calls
        if call.get("call_kind") == "chat" and call.get("round_index") == 1
    }


def _turn_cost(costs: CostBreakdown | None, turn_index: int) -> float | None:
    amount = costs.turn(turn_index).total.amount if costs is not None else None
    return None if amount is None else float(amount)


# ------------------------------------------------------------------- statistics


def summarize_runs(
    runs: Sequence[SessionRun], modes: Sequence[ToolInvocationMode]
) -> dict[ToolInvocationMode, dict[str, MetricStats]]:
    """Per mode, the median and p90 of every turn and session metric.

    The "cold left out" rows leave out the same scenario turns in every mode (see
    ``cold_left_out``), so their columns compare the same user turns.
    """
    left_out = set(cold_left_out(runs, modes))
    result: dict[ToolInvocationMode, dict[str, MetricStats]] = {}
    for mode in modes:
        mine = _runs_of(runs, mode)
        turns = [turn for run in mine for turn in run.turns]
        stats = {
            label: _turn_stats(label, (getattr(turn, name) for turn in turns))
            for label, name in TURN_METRICS
        }
        warm = [
            turn
            for repetition, run in enumerate(mine, start=1)
            for turn in run.turns
            if (repetition, turn.turn_index) not in left_out
        ]
        for label, name in WARM_METRICS:
            stats[label] = MetricStats.of(getattr(turn, name) for turn in warm)
        for label, key in SESSION_METRICS:
            stats[label] = _session_stats(label, key, mine)
        result[mode] = stats
    return result


def cold_left_out(
    runs: Sequence[SessionRun], modes: Sequence[ToolInvocationMode]
) -> list[tuple[int, int]]:
    """The ``(repetition, turn index)`` pairs the "cold left out" rows leave out, in
    every mode: each scenario turn that was cold in any mode. A mode's N-th session is
    its repetition N (the campaign's ``#N`` tag)."""
    pairs = {
        (repetition, turn.turn_index)
        for mode in modes
        for repetition, run in enumerate(_runs_of(runs, mode), start=1)
        for turn in run.turns
        if turn.cold
    }
    return sorted(pairs)


def _runs_of(runs: Sequence[SessionRun], mode: ToolInvocationMode) -> list[SessionRun]:
    return [run for run in runs if run.mode == mode]


def _turn_stats(label: str, values: Iterable[float | int | None]) -> MetricStats:
    # The table says "unknown" for a cost with an unpriced turn; so does the JSON.
    return MetricStats.whole(values) if label == COST_METRIC else MetricStats.of(values)


def _session_stats(label: str, key: str, runs: Sequence[SessionRun]) -> MetricStats:
    if label not in TOKEN_METRICS:
        return MetricStats.of(run.totals.get(key) for run in runs)
    return MetricStats.at_least(
        TokenTotal(
            tokens=int(run.totals.get(key) or 0),
            unreported_calls=int(run.totals.get("unreported_usage_calls") or 0),
            model_calls=int(run.totals.get("model_calls") or 0),
        )
        for run in runs
    )
