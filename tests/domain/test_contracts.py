"""Domain objects and request contracts (DESIGN.md §3)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.queues import RuntimeQueues
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage


def test_chat_message_and_usage_dump_exactly_their_keys() -> None:
    assert list(ChatMessage(role="user", content="hi").model_dump()) == [
        "role",
        "content",
        "name",
        "tool_call_id",
        "tool_calls",
    ]
    assert list(TokenUsage().model_dump()) == [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cached_tokens",
    ]


def test_stream_item_constructors_set_their_kind() -> None:
    event = ToolCallEvent(id="1", name="x")
    items = {
        "raw_chunk": StreamItem.raw_response_chunk({"choices": []}),
        "message_delta": StreamItem.message_delta("hi"),
        "usage": StreamItem.usage_item(TokenUsage(total_tokens=3)),
        "text_event": StreamItem.text_event(event),
        "provider_tool_call": StreamItem.provider_tool_call(event),
        "event": StreamItem.event(event),
    }
    assert {kind: item.kind for kind, item in items.items()} == {k: k for k in items}
    assert items["text_event"].event is event


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tool_invocation_mode": "telepathy"}, "tool_invocation_mode"),
        ({"chat_agent": {"model": ""}}, "chat_agent.model"),
        ({"event_agent": {"max_event_loops": -1}}, "event_agent.max_event_loops"),
        ({"event_agent": {"max_parallel_events": 0}}, "event_agent.max_parallel_events"),
        ({"chat_agent": {"model": "m", "temperature": 7}}, "chat_agent.temperature"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_a_bad_request_is_a_clear_validation_error(changes: dict[str, object], field: str) -> None:
    payload: dict[str, object] = {"user_message": "hi", "chat_agent": {"model": "m"}, **changes}
    with pytest.raises(ValidationError) as raised:
        DebugRunRequest.model_validate(payload)
    locations = {".".join(str(part) for part in error["loc"]) for error in raised.value.errors()}
    assert field in locations


def test_requests_carry_no_secret_fields() -> None:
    for model in (AgentParams, EventAgentParams, DebugRunRequest):
        assert not any("key" in name or "auth" in name for name in model.model_fields)


def test_runtime_queues_are_injectable() -> None:
    mine: asyncio.Queue[object] = asyncio.Queue(maxsize=5)
    queues = RuntimeQueues(output=mine)
    events: object = queues.events
    assert queues.output is mine and queues.input is not events
