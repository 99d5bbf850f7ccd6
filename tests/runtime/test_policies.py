"""Result policies across both modes: terminate, coalescing, templates, silent failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_lab.application.contracts import (
    ToolInvocationMode,
)
from agent_lab.application.events import ResultPolicy
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call
from tests.runtime.runtime_helpers import audits, business, collect, deltas
from tests.runtime.runtime_helpers import tools_request as _request

SCHEDULE = {
    "title": "Design review",
    "start_at": "2026-07-14T09:30:00+08:00",
    "timezone": "Asia/Shanghai",
}


def _item(mode: str, call_id: str, name: str, /, **arguments: Any) -> StreamItem:
    if mode == "dual_agent":
        return text_event(call_id, name)
    return tool_call(call_id, name, **arguments)


@pytest.mark.asyncio
async def test_mixed_batch_with_terminate_runs_everything_and_stops_without_follow_up() -> None:
    names = [
        "session.terminate",
        "calendar.schedule.create",
        "knowledge.web.search",
        "device.volume.adjust",
    ]
    client = ScriptedChatClient(
        [
            [
                StreamItem.message_delta("Wrapping up your requests."),
                tool_call("c-term", "session.terminate"),
                tool_call("c-cal", "calendar.schedule.create", **SCHEDULE),
                tool_call("c-search", "knowledge.web.search", query="event batch"),
                tool_call("c-vol", "device.volume.adjust", mode="absolute", value=30),
            ]
        ]
    )
    outputs = await collect(DebugRuntime(client).run(_request("chat_agent_tools", names)))

    client.assert_complete()
    assert len(client.calls) == 1
    results = [m["message"]["tool_call_id"] for m in outputs if m["type"] == "tool_result"]
    assert results == ["c-term", "c-cal", "c-search", "c-vol"]
    assert deltas(outputs) == [
        "Wrapping up your requests.",
        "Scheduled Design review for 2026-07-14T09:30:00+08:00 (Asia/Shanghai).",
    ]
    decision = audits(outputs, "event_policy_decision")[0]["details"]
    assert (decision["terminate"], decision["llm_follow_up"]) == (True, False)
    assert audits(outputs, "terminal_completed")[0]["details"]["event_ids"] == ["c-term"]
    assert "Goodbye." not in deltas(outputs)
    assert outputs[-1] == {"type": "done"}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_two_terminates_in_one_round_are_coalesced(mode: ToolInvocationMode) -> None:
    client = ScriptedChatClient(
        [[_item(mode, "term-1", "session.terminate"), _item(mode, "term-2", "session.terminate")]]
    )
    outputs = await collect(DebugRuntime(client).run(_request(mode, ["session.terminate"])))

    assert deltas(outputs) == ["Goodbye."]
    replies = [m["message"]["tool_call_id"] for m in outputs if m["type"] == "tool_result"]
    assert replies == ["term-1", "term-2"]
    results = audits(outputs, "event_batch_results")[0]["details"]["results"]
    assert [entry["event_id"] for entry in results] == ["term-1"]
    completed = "event_agent_completed" if mode == "dual_agent" else "provider_tools_completed"
    assert audits(outputs, completed)[0]["details"]["result_count"] == 1
    assert audits(outputs, "terminal_completed")[0]["details"]["event_ids"] == ["term-1"]
    assert outputs[-1] == {"type": "done"}


def _failing_registry(policy: ResultPolicy) -> ToolRegistry:
    def fail(event: ToolCallEvent) -> dict[str, Any]:
        raise RuntimeError("device offline")

    return ToolRegistry(
        [
            ToolDefinition(
                name="device.fragile",
                description="Fails.",
                parameters={"type": "object"},
                handler=fail,
                result_policy=policy,
                confirmation_template="Done.",
            )
        ]
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
@pytest.mark.parametrize("policy", [ResultPolicy.SILENT_SUCCESS, ResultPolicy.TEMPLATE])
async def test_failed_silent_or_template_tool_gets_exactly_one_corrective_round(
    mode: ToolInvocationMode, policy: ResultPolicy
) -> None:
    client = ScriptedChatClient(
        [
            [_item(mode, "fragile-1", "device.fragile")],
            text("Sorry, the device is offline."),
        ]
    )
    runtime = DebugRuntime(client, registry=_failing_registry(policy))
    outputs = await collect(runtime.run(_request(mode, ["device.fragile"], loops=3)))

    client.assert_complete()
    assert len(client.calls) == 2
    assert deltas(outputs) == ["Sorry, the device is offline."]
    result = next(m for m in outputs if m["type"] == "tool_result")
    assert json.loads(result["message"]["content"])["error"] == (
        "tool handler failed: device offline"
    )
    decision = audits(outputs, "event_policy_decision")[0]["details"]
    assert decision == {**decision, "terminate": False, "llm_follow_up": True}
    assert outputs[-1] == {"type": "done"}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_successful_silent_tool_needs_no_second_call(mode: ToolInvocationMode) -> None:
    client = ScriptedChatClient(
        [
            [
                StreamItem.message_delta("Turning it down."),
                _item(mode, "v1", "device.volume.adjust", mode="absolute", value=20),
            ]
        ]
    )
    request = _request(mode, ["device.volume.adjust"]).model_copy(
        update={"user_message": "set the volume to 20"}
    )
    outputs = await collect(DebugRuntime(client).run(request))

    assert len(client.calls) == 1
    payload = json.loads(
        next(m for m in outputs if m["type"] == "tool_result")["message"]["content"]
    )
    assert payload["volume"] == 20
    assert business(outputs)[-1] == {"type": "done"}
