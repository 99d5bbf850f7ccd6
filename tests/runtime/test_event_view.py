"""The event agent's view of a session's history is kept as messages are appended, and
is exactly what ``event_agent_history`` makes of the whole history."""

from __future__ import annotations

from agent_lab.application._transcript import (
    EventView,
    History,
    event_agent_history,
    event_history,
    results_message,
)
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

PRE = [
    ChatMessage(role="system", content="be brief"),
    ChatMessage(role="user", content="earlier", name="ann"),
    ChatMessage(role="assistant", content="noted"),
]


def _conversation() -> list[ChatMessage]:
    call = ToolCallEvent(id="c1", name="lookup", arguments={"q": "x"})
    return [
        ChatMessage(role="user", content="find x", name="ann"),
        ChatMessage(role="assistant", content="looking", tool_calls=[call]),
        ChatMessage(role="tool", content="{}", name="lookup", tool_call_id="c1"),
        results_message([ChatMessage(role="tool", content="found")]),
        ChatMessage(role="assistant", content="here it is"),
    ]


def test_the_kept_view_equals_the_history_rebuilt_each_time() -> None:
    history = History()
    pre = EventView(PRE)
    for message in _conversation():
        history.append(message)
        tail = ChatMessage(role="assistant", content="one more")
        seen = event_history(pre, history.event_view, tail)
        assert seen.messages == event_agent_history(PRE, [*history, tail])
        assert seen.dumps == [message.model_dump() for message in seen.messages]


def test_each_message_is_copied_once_not_per_batch() -> None:
    history, pre = History(_conversation()), EventView(PRE)
    first = event_history(pre, history.event_view)
    history.append(ChatMessage(role="user", content="and y?"))
    second = event_history(pre, history.event_view)
    assert len(second.messages) == len(first.messages) + 1
    assert all(a is b for a, b in zip(first.messages, second.messages, strict=False))
    assert all(a is b for a, b in zip(first.dumps, second.dumps, strict=False))
    assert [m.content for m in second.messages[-2:]] == ["here it is", "and y?"]
    assert all(m.name is None and not m.tool_calls for m in second.messages)
