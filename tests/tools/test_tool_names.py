"""A tool's name is one an event block can name: the registry refuses any other, so a
``dual_agent`` chat agent can call every tool it is offered."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START, ToolCallEvent
from agent_lab.infrastructure.openai_compat.text_events import TextEventParser

ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}


def define(name: str, reply: str = "ok") -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="A test tool.",
        parameters=ANY_ARGUMENTS,
        handler=lambda event: {"tool": event.name, "reply": reply},
    )


def named_by_a_block(name: str) -> bool:
    """Whether ``<event>name</event>`` is exactly one event called ``name``."""
    parser = TextEventParser()
    pieces = parser.feed(f"{EVENT_BLOCK_START}{name}{EVENT_BLOCK_END}") + parser.finish()
    events = [piece for piece in pieces if isinstance(piece, ToolCallEvent)]
    return len(events) == 1 and events[0].name == name


@pytest.mark.parametrize(
    "name", ["", " ", "has space", "a,b", ".hidden", "-dash", "x" * 65, "<event>", "naïve", "a\n"]
)
def test_a_name_no_event_block_can_hold_is_refused_with_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match="use 1 to 64 letters, digits"):
        define(name)


@pytest.mark.parametrize("name", ["orders.lookup", "a-b_c.9", "_", "x" * 64, "Device.Volume"])
def test_a_name_an_event_block_can_hold_is_accepted(name: str) -> None:
    assert ToolRegistry([define(name)]).names() == [name]


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=70))
def test_a_name_is_accepted_exactly_when_an_event_block_names_it(name: str) -> None:
    try:
        define(name)
    except ValueError:
        accepted = False
    else:
        accepted = True
    assert accepted == named_by_a_block(name)


@given(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}", fullmatch=True))
def test_every_well_formed_name_is_accepted_and_named_by_a_block(name: str) -> None:
    define(name)
    assert named_by_a_block(name)


def test_two_tools_of_one_name_in_one_registry_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools named 'orders.lookup'"):
        ToolRegistry([define("orders.lookup", "first"), define("orders.lookup", "second")])


@pytest.mark.asyncio
async def test_registering_a_name_again_replaces_the_tool() -> None:
    registry = ToolRegistry([define("orders.lookup", "first")])
    registry.register(define("orders.lookup", "second"))
    payload = await registry.execute_async(ToolCallEvent(id="c1", name="orders.lookup"))
    assert registry.names() == ["orders.lookup"] and payload["reply"] == "second"
