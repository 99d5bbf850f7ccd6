"""The tool-protocol check every transcript passes before it is sent."""

from __future__ import annotations

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.openai_compat.request_body import build_chat_request
from agent_lab.infrastructure.openai_compat.transcript_validation import validate_tool_transcript


def user(text: str = "q") -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(*ids: str, text: str = "") -> ChatMessage:
    return ChatMessage(
        role="assistant", content=text, tool_calls=[ToolCallEvent(id=i, name="t") for i in ids]
    )


def reply(call_id: str | None) -> ChatMessage:
    return ChatMessage(role="tool", content="{}", tool_call_id=call_id, name="t")


VALID = [
    [],
    [ChatMessage(role="system", content="s"), user(), assistant(text="plain answer")],
    [user(), assistant("a", "b"), reply("a"), reply("b"), assistant(text="done")],
    [user(), assistant("a", "b"), reply("b"), reply("a"), user("next")],
    [user(), assistant("a"), reply("a"), assistant("b"), reply("b")],
    [user(), assistant("a"), reply("a"), assistant(text="past answer"), user("current")],
]


@pytest.mark.parametrize("messages", VALID)
def test_valid_transcripts_pass(messages: list[ChatMessage]) -> None:
    validate_tool_transcript(messages)


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([user(), reply("x")], "answers call 'x', which no preceding assistant message declared"),
        ([reply("x")], "answers call 'x', which no preceding assistant message declared"),
        ([user(), assistant("a"), reply(None)], "tool message at index 2 has no tool_call_id"),
        ([user(), assistant("a", "b"), reply("a"), user()], "tool calls 'b' are unanswered before"),
        ([user(), assistant("a"), assistant(text="x")], "'a' are unanswered before the assistant"),
        ([user(), assistant("a", "b"), reply("a")], "'b' are unanswered at the end"),
        ([user(), assistant("a")], "'a' are unanswered at the end of the transcript"),
        ([user(), assistant("a", "a")], "duplicate tool-call id 'a'"),
        (
            [user(), assistant("a"), reply("a"), assistant("a"), reply("a")],
            "duplicate tool-call id 'a'",
        ),
        ([user(), assistant("a"), reply("a"), reply("a")], "answers call 'a' again"),
        ([user(), assistant("a"), reply("a"), user(), reply("a")], "answers call 'a' again"),
    ],
)
def test_invalid_transcripts_name_the_problem(messages: list[ChatMessage], problem: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_tool_transcript(messages)
    assert problem in str(info.value)


def _wire(messages: list[ChatMessage]) -> list[dict[str, object]]:
    return build_chat_request(messages, [], AgentParams(model="m"), None).messages


def test_plain_messages_of_one_role_in_a_row_go_as_one_message() -> None:
    """A turn that failed before its answer, then the next question; and two answers."""
    sent = _wire(
        [
            ChatMessage(role="system", content="s"),
            user("What is the WAL?"),
            user("Are you there?"),
            assistant(text="Yes."),
            assistant(text="The WAL is a log."),
            user("Thanks."),
        ]
    )

    assert sent == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "What is the WAL?\n\nAre you there?"},
        {"role": "assistant", "content": "Yes.\n\nThe WAL is a log."},
        {"role": "user", "content": "Thanks."},
    ]


def test_tool_protocol_and_alternating_transcripts_are_sent_unchanged() -> None:
    messages = [
        user("q"),
        assistant("a", text="Looking."),
        reply("a"),
        assistant("b"),
        reply("b"),
        assistant(text="done"),
        user("next"),
    ]
    sent = _wire(messages)

    assert [m["role"] for m in sent] == [m.role for m in messages]
    assert len(sent) == len(messages)


def test_a_message_sent_again_after_its_turn_failed_goes_once() -> None:
    """The user repeats the message whose turn failed: the folded run says it once."""
    sent = _wire([user("Note that the cheese is ready."), user("Note that the cheese is ready.")])

    assert sent == [{"role": "user", "content": "Note that the cheese is ready."}]
