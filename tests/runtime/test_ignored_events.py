"""Events the model named that were not on offer never run, and each is recorded: the
round's ``chat_agent_response`` audit lists them in ``ignored_event_names``, whether
the name was never offered, the turn's event budget was spent, or no tools were on
offer at all."""

from __future__ import annotations

from typing import Any

import pytest

from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem
from agent_lab.testing import ScriptedChatClient, text, text_event
from tests.runtime.runtime_helpers import Output, audits, collect, tools_request


def _notes(ran: list[str]) -> ToolRegistry:
    def handle(event: ToolCallEvent) -> dict[str, Any]:
        ran.append(event.id)
        return {"kept": event.arguments.get("note")}

    return ToolRegistry(
        [
            ToolDefinition(
                name="notes.add",
                description="Keep a note.",
                parameters={"type": "object", "properties": {"note": {"type": "string"}}},
                handler=handle,
                argument_resolver=lambda event, context: {"note": "milk"},
            )
        ]
    )


def _ignored(outputs: list[Output]) -> list[list[str]]:
    responses = audits(outputs, "chat_agent_response")
    return [response["details"].get("ignored_event_names", []) for response in responses]


@pytest.mark.asyncio
async def test_an_event_name_not_on_offer_is_recorded_and_never_runs() -> None:
    ran: list[str] = []
    client = ScriptedChatClient([[*text("Trying "), text_event("evt-1", "nuke.all")]])
    runtime = DebugRuntime(client, registry=_notes(ran))
    outputs = await collect(runtime.run(tools_request("dual_agent", ["notes.add"], loops=3)))

    assert ran == []
    assert [m for m in outputs if m["type"] == "event"] == []
    assert _ignored(outputs) == [["nuke.all"]]
    assert outputs[-1]["type"] == "done"


@pytest.mark.asyncio
async def test_an_event_written_once_the_budget_is_spent_is_recorded_and_never_runs() -> None:
    ran: list[str] = []
    client = ScriptedChatClient(
        [
            [*text("Noting. "), text_event("evt-1", "notes.add")],
            [*text("Again "), text_event("evt-2", "notes.add")],
        ]
    )
    runtime = DebugRuntime(client, registry=_notes(ran))
    outputs = await collect(runtime.run(tools_request("dual_agent", ["notes.add"], loops=1)))

    assert ran == ["evt-1"], "the second block came after the turn's one event round"
    assert _ignored(outputs) == [[], ["notes.add"]]
    assert outputs[-1]["type"] == "done"


@pytest.mark.asyncio
async def test_a_provider_call_when_no_tools_were_offered_is_recorded_and_never_runs() -> None:
    ran: list[str] = []
    call = ToolCallEvent(id="call_1", name="notes.add", raw_arguments='{"note": "x"}')
    client = ScriptedChatClient([[*text("Sure."), StreamItem.provider_tool_call(call)]])
    runtime = DebugRuntime(client, registry=_notes(ran))
    outputs = await collect(runtime.run(tools_request("chat_agent_tools", [])))

    assert ran == []
    assert _ignored(outputs) == [["notes.add"]]
    assert outputs[-1]["type"] == "done"
