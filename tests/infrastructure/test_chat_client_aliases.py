"""Reversible provider aliases for registry tool names, and the wire format of messages."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.openai_compat.request_body import build_chat_request, wire_message
from agent_lab.infrastructure.openai_compat.tool_names import PROVIDER_NAME, ToolNameAliases


def test_valid_names_are_kept_and_dotted_names_aliased() -> None:
    aliases = ToolNameAliases(["handoff_note", "calendar.schedule.create"])
    assert aliases.to_provider("handoff_note") == "handoff_note"
    assert aliases.to_provider("calendar.schedule.create") == "calendar__schedule__create"
    assert aliases.to_registry("calendar__schedule__create") == "calendar.schedule.create"
    assert aliases.to_registry("handoff_note") == "handoff_note"
    assert aliases.aliased == {"calendar.schedule.create": "calendar__schedule__create"}


def test_unknown_provider_names_come_back_unchanged() -> None:
    aliases = ToolNameAliases(["a.b"])
    assert aliases.to_registry("a.b") == "a.b"
    assert aliases.to_registry("something_else") == "something_else"


def test_a_real_name_equal_to_an_alias_wins_and_the_alias_moves() -> None:
    aliases = ToolNameAliases(["calendar.schedule.create", "calendar__schedule__create"])
    assert aliases.to_provider("calendar__schedule__create") == "calendar__schedule__create"
    alias = aliases.to_provider("calendar.schedule.create")
    assert alias != "calendar__schedule__create"
    assert PROVIDER_NAME.match(alias)
    assert aliases.to_registry(alias) == "calendar.schedule.create"
    assert aliases.to_registry("calendar__schedule__create") == "calendar__schedule__create"


def test_two_names_with_the_same_readable_alias_stay_apart() -> None:
    aliases = ToolNameAliases(["a.b", "a b", "a/b"])
    provider = [aliases.to_provider(name) for name in ["a.b", "a b", "a/b"]]
    assert len(set(provider)) == 3
    assert [aliases.to_registry(alias) for alias in provider] == ["a.b", "a b", "a/b"]


def test_long_names_are_cut_to_64_characters() -> None:
    name = "x." * 50
    alias = ToolNameAliases([name]).to_provider(name)
    assert len(alias) <= 64 and PROVIDER_NAME.match(alias)


def test_names_first_seen_late_are_aliased_on_demand() -> None:
    aliases = ToolNameAliases(["a.b"])
    assert aliases.to_provider("late.name") == "late__name"
    assert aliases.to_registry("late__name") == "late.name"


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8, unique=True))
def test_any_set_of_names_round_trips(names: list[str]) -> None:
    aliases = ToolNameAliases(names)
    provider = [aliases.to_provider(name) for name in names]
    assert all(PROVIDER_NAME.match(alias) for alias in provider)
    assert len(set(provider)) == len(names)
    assert [aliases.to_registry(alias) for alias in provider] == names
    assert all(aliases.to_provider(name) == name for name in names if PROVIDER_NAME.match(name))


def test_build_request_aliases_tools_choice_and_transcript_consistently() -> None:
    call = ToolCallEvent(id="c1", name="device.volume.adjust", arguments={"level": 3})
    messages = [
        ChatMessage(role="user", content="louder"),
        ChatMessage(role="assistant", content="On it.", tool_calls=[call]),
        ChatMessage(role="tool", content="{}", tool_call_id="c1", name="device.volume.adjust"),
    ]
    tools = [{"type": "function", "function": {"name": "device.volume.adjust", "parameters": {}}}]
    choice = {"type": "function", "function": {"name": "device.volume.adjust"}}
    request = build_chat_request(messages, tools, AgentParams(model="m"), choice)
    assert request.options["tools"][0]["function"]["name"] == "device__volume__adjust"
    assert request.options["tool_choice"]["function"]["name"] == "device__volume__adjust"
    assert request.messages[1]["tool_calls"][0]["function"] == {
        "name": "device__volume__adjust",
        "arguments": '{"level": 3}',
    }
    assert request.messages[1]["content"] == "On it."
    assert request.messages[2]["name"] == "device__volume__adjust"
    assert request.aliases.to_registry("device__volume__adjust") == "device.volume.adjust"


def test_extra_body_cannot_turn_streaming_off_or_replace_the_transcript() -> None:
    params = AgentParams(
        model="m", extra_body={"stream": False, "messages": [], "stream_options": None, "n": 1}
    )
    request = build_chat_request([], [], params, None)
    assert "stream" not in request.options and "messages" not in request.options
    assert request.options["stream_options"] is None
    assert request.options["n"] == 1


def test_arguments_sent_back_are_the_model_text_when_it_matches() -> None:
    aliases = ToolNameAliases()

    def sent(call: ToolCallEvent) -> str:
        message = ChatMessage(role="assistant", tool_calls=[call])
        return str(wire_message(message, aliases)["tool_calls"][0]["function"]["arguments"])

    assert sent(ToolCallEvent(id="a", name="t", arguments={"x": 1}, raw_arguments='{ "x":1 }')) == (
        '{ "x":1 }'
    )
    # Resolved later by the event agent: raw text still the "{}" default.
    assert sent(ToolCallEvent(id="a", name="t", arguments={"x": 1})) == '{"x": 1}'
    # Malformed model text is not sent back to strict servers.
    assert sent(ToolCallEvent(id="a", name="t", arguments={}, raw_arguments='{"x": ')) == "{}"


def test_wire_messages_by_role() -> None:
    aliases = ToolNameAliases()
    assert wire_message(ChatMessage(role="system", content="s"), aliases) == {
        "role": "system",
        "content": "s",
    }
    assert wire_message(ChatMessage(role="user", content="u", name="event_agent"), aliases) == {
        "role": "user",
        "content": "u",
        "name": "event_agent",
    }
    assert wire_message(ChatMessage(role="assistant", content=""), aliases) == {
        "role": "assistant",
        "content": "",
    }
    assert wire_message(ChatMessage(role="tool", content="r", tool_call_id="c"), aliases) == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "r",
    }
