"""The event agent's view of a session's history is kept as messages are appended, and
is exactly what ``event_agent_history`` makes of the whole history."""

from __future__ import annotations

import gc

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


def _request_dumps(history: History) -> list[dict[str, object]]:
    dumps: list[dict[str, object]] = []
    history.add_dumps(dumps)
    return dumps


def test_every_request_lists_the_dump_of_every_message_sent() -> None:
    history = History(_conversation()[:2])
    for message in [*_conversation()[2:], None, ChatMessage(role="user", content="and z?")]:
        assert _request_dumps(history) == [m.model_dump() for m in history]
        if message is not None:
            history.append(message)
    assert _request_dumps(history) == [m.model_dump() for m in history]


def test_a_message_sent_once_leaves_no_dump_behind_and_one_sent_again_is_dumped_once() -> None:
    history = History([ChatMessage(role="user", content="hello")])
    first = _request_dumps(history)
    del first
    assert held_dumps(history) == 0  # the first request's dump lived with its audit
    second, third = _request_dumps(history), _request_dumps(history)
    assert second == third == [history[0].model_dump()]
    assert second[0] is third[0]  # kept from its second request on
    assert held_dumps(history) == 1


def held_dumps(history: History) -> int:
    """The message dumps the history itself holds on to, apart from its messages."""
    held = [item for item in gc.get_referents(history) if item is not history.messages]
    lists = [item for item in held if isinstance(item, list)]
    return sum(isinstance(item, dict) for items in lists for item in items)
