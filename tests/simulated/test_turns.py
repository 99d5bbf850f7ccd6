"""Whole turns against the simulator: the real server, the real client, a real runtime.

The simulated model must behave like a model that reads its conversation: each
requested action runs once per user turn, in both tool modes, and the final answer
states what the tools returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agent_lab.application.builtin_tools import builtin_tool_definitions
from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.pricing import Price, cost_breakdown
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.prices import price_table
from agent_lab.infrastructure.simulator.provider import SimulatedProviderServer
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import TOOLS_DATABASE_NAME, local_backends
from agent_lab.infrastructure.tool_backends.stores import SQLiteCalendar, SQLiteDeviceState

PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)
TOOLS = [
    "device.volume.adjust",
    "calendar.schedule.create",
    "knowledge.web.search",
    "handoff_note",
    "session.terminate",
]
MODES: list[ToolInvocationMode] = ["dual_agent", "chat_agent_tools"]
NOON_IN_BERLIN = "2026-07-14T12:00:00+02:00"
"""``tomorrow at noon`` seen from the fixed clock (summer time in Berlin)."""


@pytest_asyncio.fixture
async def chat_client(server: SimulatedProviderServer) -> AsyncIterator[OpenAICompatibleChatClient]:
    async with OpenAICompatibleChatClient(server.base_url, max_retries=0) as client:
        yield client


async def run_turn(
    client: OpenAICompatibleChatClient,
    home: Path,
    mode: ToolInvocationMode,
    message: str = PROMPT,
    registry: ToolRegistry | None = None,
) -> tuple[list[OutputMessage], dict[str, Any]]:
    """One turn with the built-in tools on files under ``home``; outputs and usage."""
    registry = registry or build_default_tool_registry(local_backends(home))
    with SQLiteSessionStore(home / "sessions.sqlite3") as store:
        runtime = DebugRuntime(client, registry=registry, session_store=store)
        request = DebugRunRequest(
            user_message=message,
            chat_agent=AgentParams(model="agent-lab-sim"),
            event_agent=EventAgentParams(enabled_tools=TOOLS),
            tool_invocation_mode=mode,
        )
        outputs = [output async for output in runtime.run(request)]
        session_id = next(
            o["session_id"] for o in outputs if o["type"] == "session_started" and "session_id" in o
        )
        return outputs, store.usage_summary(session_id)


def results(outputs: list[OutputMessage]) -> list[dict[str, Any]]:
    """Each tool result's name and payload, in order."""
    return [
        {"name": o["message"]["name"], **json.loads(o["message"]["content"])}
        for o in outputs
        if o["type"] == "tool_result"
    ]


def spoken(outputs: list[OutputMessage]) -> str:
    return "".join(o["content"] for o in outputs if o["type"] == "message_delta")


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_each_requested_action_runs_once_per_turn(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path, mode: ToolInvocationMode
) -> None:
    outputs, usage = await run_turn(chat_client, tmp_path, mode)

    assert outputs[-1] == {"type": "done"}
    names = [event["event"]["name"] for event in outputs if event["type"] == "event"]
    assert sorted(names) == sorted(TOOLS[:3])
    assert [r["name"] for r in results(outputs)] == names
    assert usage["session"]["tool_count"] == 3
    entries = SQLiteCalendar(tmp_path / TOOLS_DATABASE_NAME).list_entries()
    assert [(e.title, e.timezone) for e in entries] == [("Lunch with Sam", "Europe/Berlin")]
    assert SQLiteDeviceState(tmp_path / TOOLS_DATABASE_NAME).volume() == 30


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "message",
    [
        "Search for sqlite wal and set the volume to 20",
        "Take a note that the customer wants a refund",
    ],
)
async def test_both_modes_give_the_tools_the_same_arguments(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path, message: str
) -> None:
    """The lab compares the modes on one conversation: the event agent's resolvers must
    pass the tools what the model passes them in ``chat_agent_tools``, or the two
    sessions do different things."""
    payloads = {}
    for mode in MODES:
        outputs, _ = await run_turn(chat_client, tmp_path / mode, mode, message)
        payloads[mode] = sorted(results(outputs), key=lambda result: str(result["name"]))

    assert payloads["dual_agent"] == payloads["chat_agent_tools"]
    assert payloads["dual_agent"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_final_answer_states_what_the_tools_returned(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path, mode: ToolInvocationMode
) -> None:
    outputs, _ = await run_turn(chat_client, tmp_path, mode)

    by_name = {result["name"]: result for result in results(outputs)}
    text = spoken(outputs)
    assert f"Volume set to {by_name['device.volume.adjust']['volume']}." in text
    calendar = by_name["calendar.schedule.create"]
    assert (calendar["start_at"], calendar["timezone"]) == (NOON_IN_BERLIN, "Europe/Berlin")
    assert f"{calendar['start_at']} ({calendar['timezone']})" in text
    assert by_name["knowledge.web.search"]["results"][0]["title"] in text
    assert "can't" not in text and "Sorry" not in text


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_the_turn_ends_with_one_summary_round(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path, mode: ToolInvocationMode
) -> None:
    outputs, usage = await run_turn(chat_client, tmp_path, mode)

    chat_calls = [c for c in usage["calls"] if c["call_kind"] == "chat"]
    assert [c["round_index"] for c in chat_calls] == [1, 2]
    rounds = [o for o in outputs if o["type"] == "round_stats"]
    assert [(o["round_index"], o["had_event"]) for o in rounds] == [(1, True), (2, False)]


def _speaker_unplugged(event: ToolCallEvent) -> dict[str, Any]:
    raise RuntimeError("no speaker")


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_failed_action_is_reported_and_not_retried(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path, mode: ToolInvocationMode
) -> None:
    tools = [
        replace(tool, handler=_speaker_unplugged) if tool.name == TOOLS[0] else tool
        for tool in builtin_tool_definitions(local_backends(tmp_path))
    ]
    message = "Turn it up and schedule lunch with Sam tomorrow at noon"
    outputs, usage = await run_turn(chat_client, tmp_path, mode, message, ToolRegistry(tools))

    volume, calendar = results(outputs)
    assert volume["name"] == "device.volume.adjust" and "no speaker" in volume["error"]
    assert calendar["name"] == "calendar.schedule.create" and calendar["status"] == "scheduled"
    assert usage["session"]["tool_count"] == 2
    assert len(SQLiteCalendar(tmp_path / TOOLS_DATABASE_NAME).list_entries()) == 1
    text = spoken(outputs)
    assert "Sorry, adjusting the volume failed" in text and "no speaker" in text
    assert "Volume set" not in text


def test_demo_runs_each_action_once_and_answers_agree(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_LAB_HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "agent_lab", "demo", "--fast", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if "can't" in line or "Sorry" in line]
    events = [line.split("event", 1)[1].split()[0] for line in lines if "⚡ event" in line]
    per_mode = ["device.volume.adjust", "calendar.schedule.create", "knowledge.web.search"]
    assert events == [*per_mode, "session.terminate"] * 2
    reported = [line.split("↳", 1)[1].split(":")[0].strip() for line in lines if "↳" in line]
    assert reported == events
    scheduled = [line for line in lines if "Scheduled Design review with Dana for" in line]
    assert len(scheduled) == 2 and all("(Europe/Berlin)" in line for line in scheduled)
    assert sum('"SQLite write-ahead logging in practice"' in line for line in lines) == 2


@pytest.mark.asyncio
async def test_a_stored_turn_is_priced_per_call_round_and_role(
    chat_client: OpenAICompatibleChatClient, tmp_path: Path
) -> None:
    _, usage = await run_turn(chat_client, tmp_path, "dual_agent")
    sim = Price(input_per_mtok=Decimal(1), output_per_mtok=Decimal(2), cached_input_per_mtok=None)

    priced = cost_breakdown(usage["calls"], price_table({"agent-lab-sim": sim}))
    unpriced = cost_breakdown(usage["calls"], price_table())

    models = [c for c in usage["calls"] if c["call_kind"] != "tool_execution"]
    assert [c.metric_key for c in priced.calls] == [c["metric_key"] for c in models]
    for cost, call in zip(priced.calls, models, strict=True):
        assert cost.amount == sim.cost(call["prompt_tokens"], call["completion_tokens"])
    first, second = priced.round(1, 1).total.amount, priced.round(1, 2).total.amount
    assert first is not None and second is not None
    assert priced.turn(1).total.amount == priced.session.total.amount == first + second
    fallbacks = [c for c in models if c["call_kind"] != "chat"]
    assert fallbacks, "the event agent asked the model for some arguments"
    by_role = priced.session.by_role
    assert by_role["chat"].priced_calls == 2
    assert by_role["argument_fallback"].priced_calls + by_role[
        "argument_generation"
    ].priced_calls == len(fallbacks)
    assert unpriced.session.total.amount is None
    assert unpriced.session.total.describe() == "unknown"
