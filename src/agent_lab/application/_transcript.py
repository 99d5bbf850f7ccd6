"""What each agent sees: chat request messages, event-agent history, and restore rules
(the modes in ``_modes`` pick theirs)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

EVENT_AGENT_NAME = "event_agent"
RESULTS_HEADER = "EventAgent results:\n"


class History:
    """The conversation after the pre-messages, append-only, with the dumps its request
    audits list (every message sent, every round), and the event agent's view of it
    (``EventView``), made on first use (only a ``dual_agent`` batch asks for it) and
    then kept up to date as messages are appended.

    A message's dump is kept once a second request sends it: the request that sends a
    message for the first time gets a dump made for it alone, which lives only as long
    as that audit does. So a session keeps no dump (nor a list of them) of what it has
    sent only once, such as the user message of the turn it is streaming, and a long
    history is still dumped at most twice per message, not once per round."""

    __slots__ = ("_event_view", "_kept", "_sent", "messages")

    def __init__(self, messages: Iterable[ChatMessage] = ()) -> None:
        self.messages: list[ChatMessage] = []
        self._kept: list[dict[str, Any]] | None = None
        """The dumps of the first ``len(_kept)`` messages (made by their second request)."""
        self._sent = 0
        """How many messages the last request sent."""
        self._event_view: EventView | None = None
        self.extend(messages)

    @property
    def event_view(self) -> EventView:
        if self._event_view is None:
            self._event_view = EventView(self.messages)
        return self._event_view

    def append(self, message: ChatMessage) -> None:
        self.messages.append(message)
        if self._event_view is not None:
            self._event_view.add(message)

    def extend(self, messages: Iterable[ChatMessage]) -> None:
        for message in messages:
            self.append(message)

    def add_dumps(self, dumps: list[dict[str, Any]]) -> None:
        """Append every message's dump to ``dumps`` (a request audit's list), in order."""
        messages, sent, kept = self.messages, self._sent, self._kept
        if sent and (kept is None or len(kept) < sent):  # sent again now: keep them
            if kept is None:
                kept = self._kept = []
            kept.extend(message.model_dump() for message in messages[len(kept) : sent])
        if kept:
            dumps.extend(kept)
        dumps.extend(message.model_dump() for message in messages[len(kept or ()) :])
        self._sent = len(messages)

    def __iter__(self) -> Iterator[ChatMessage]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index: int) -> ChatMessage:
        return self.messages[index]


class EventView:
    """``event_agent_history`` of a message sequence, built one message at a time: each
    message is copied and dumped once, not again for every batch of the session."""

    __slots__ = ("dumps", "messages")

    def __init__(self, messages: Iterable[ChatMessage] = ()) -> None:
        self.messages: list[ChatMessage] = []
        self.dumps: list[dict[str, Any]] = []
        for message in messages:
            self.add(message)

    def add(self, message: ChatMessage) -> None:
        seen = event_agent_message(message)
        if seen is not None:
            self.messages.append(seen)
            self.dumps.append(seen.model_dump())


@dataclass(frozen=True)
class EventHistory:
    """What the event agent sees of one batch's conversation, and its dumps."""

    messages: list[ChatMessage]
    dumps: list[dict[str, Any]]


def event_history(pre_messages: EventView, history: EventView, *tail: ChatMessage) -> EventHistory:
    """``event_agent_history(pre_messages, [*history, *tail])`` from the kept views."""
    messages = [*pre_messages.messages, *history.messages]
    dumps = [*pre_messages.dumps, *history.dumps]
    for message in tail:
        seen = event_agent_message(message)
        if seen is not None:
            messages.append(seen)
            dumps.append(seen.model_dump())
    return EventHistory(messages, dumps)


@dataclass(frozen=True)
class ChatRequestMessages:
    """The messages of one chat call, and their dumps for the request audit."""

    messages: list[ChatMessage]
    dumps: list[dict[str, Any]]


def system_messages(request: DebugRunRequest) -> list[ChatMessage]:
    prompts = [*request.system_prompts]
    if request.chat_agent.system_prompt:
        prompts.append(request.chat_agent.system_prompt)
    return [ChatMessage(role="system", content=prompt) for prompt in prompts]


class RequestPrefix:
    """What every chat call of a session starts with: system prompts and pre-messages,
    dumped once, and where the event catalog goes (after the leading system messages)."""

    __slots__ = ("_event_view", "_pre_messages", "catalog_at", "dumps", "messages")

    def __init__(self, request: DebugRunRequest) -> None:
        self.messages = [*system_messages(request), *request.pre_messages]
        self.dumps = [message.model_dump() for message in self.messages]
        self._pre_messages: Sequence[ChatMessage] = request.pre_messages
        self._event_view: EventView | None = None
        self.catalog_at = next(
            (index for index, message in enumerate(self.messages) if message.role != "system"),
            len(self.messages),
        )

    @property
    def event_view(self) -> EventView:
        """The pre-messages as the event agent sees them (made on first use)."""
        if self._event_view is None:
            self._event_view = EventView(self._pre_messages)
        return self._event_view


def request_prefix(request: DebugRunRequest) -> RequestPrefix:
    """The request's prefix; one per process for each set of system prompts when the
    request has no pre-messages (as a server's sessions mostly share their prompts).

    A prefix is never changed once made, so sessions can share its messages and dumps.
    """
    if request.pre_messages:
        return RequestPrefix(request)
    key = (*request.system_prompts, request.chat_agent.system_prompt)
    prefix = _SHARED_PREFIXES.get(key)
    if prefix is None:
        prefix = RequestPrefix(request)
        prefix._pre_messages = ()
        if len(_SHARED_PREFIXES) >= _SHARED_PREFIX_LIMIT:
            _SHARED_PREFIXES.clear()
        _SHARED_PREFIXES[key] = prefix
    return prefix


_SHARED_PREFIXES: dict[tuple[str, ...], RequestPrefix] = {}
_SHARED_PREFIX_LIMIT = 256


def chat_request_messages(
    prefix: RequestPrefix, history: History, catalog: str | None
) -> ChatRequestMessages:
    """System prompts, the catalog after the leading system messages, pre-messages, history."""
    messages = [*prefix.messages, *history.messages]
    dumps = [*prefix.dumps]
    history.add_dumps(dumps)
    if catalog is not None:
        catalog_message = ChatMessage(role="system", content=catalog)
        messages.insert(prefix.catalog_at, catalog_message)
        dumps.insert(prefix.catalog_at, catalog_message.model_dump())
    return ChatRequestMessages(messages=messages, dumps=dumps)


def event_agent_history(
    pre_messages: Iterable[ChatMessage], history: Iterable[ChatMessage]
) -> list[ChatMessage]:
    """User and assistant messages only, no event-agent replies, every ``name`` cleared."""
    return [
        seen
        for source in (pre_messages, history)
        for message in source
        if (seen := event_agent_message(message)) is not None
    ]


def event_agent_message(message: ChatMessage) -> ChatMessage | None:
    """The event agent's copy of one message (role and content), or ``None`` when it
    does not see it (tool protocol, system prompts, event-agent replies)."""
    if message.role in ("user", "assistant") and message.name != EVENT_AGENT_NAME:
        return ChatMessage(role=message.role, content=message.content)
    return None


def results_message(replies: Sequence[ChatMessage]) -> ChatMessage:
    """The single user message that hands the event agent's results to the chat agent."""
    lines = "\n".join(reply.content for reply in replies)
    return ChatMessage(role="user", content=RESULTS_HEADER + lines, name=EVENT_AGENT_NAME)


def message_from_record(record: dict[str, Any]) -> ChatMessage:
    return ChatMessage(
        role=record["role"],
        content=record.get("content") or "",
        name=record.get("name"),
        tool_call_id=record.get("tool_call_id"),
        tool_calls=[ToolCallEvent.model_validate(call) for call in record.get("tool_calls") or []],
    )


def visible_history(messages: Iterable[ChatMessage]) -> list[ChatMessage]:
    """User and assistant messages with visible text, without the tool protocol."""
    return [
        ChatMessage(role=message.role, content=message.content)
        for message in messages
        if message.role in ("user", "assistant")
        and message.name != EVENT_AGENT_NAME
        and message.content.strip()
    ]


def repair_tool_transcript(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Keep complete tool batches; drop orphans, partial results and empty assistants."""
    repaired: list[ChatMessage] = []
    seen_ids: set[str] = set()
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role == "tool":
            continue  # an orphan: no open batch declared it
        if message.role == "assistant" and message.tool_calls:
            replies, index = _collect_replies(messages, index)
            repaired.extend(_repair_batch(message, replies, seen_ids))
            continue
        if message.role == "assistant" and not message.content.strip():
            continue
        repaired.append(message)
    return repaired


def _collect_replies(messages: Sequence[ChatMessage], index: int) -> tuple[list[ChatMessage], int]:
    replies: list[ChatMessage] = []
    while index < len(messages) and messages[index].role == "tool":
        replies.append(messages[index])
        index += 1
    return replies, index


def _repair_batch(
    assistant: ChatMessage, replies: list[ChatMessage], seen_ids: set[str]
) -> list[ChatMessage]:
    call_ids = [call.id for call in assistant.tool_calls]
    by_id = _first_reply_per_call(call_ids, replies)
    if _batch_is_complete(call_ids, by_id, seen_ids):
        seen_ids.update(call_ids)
        return [assistant, *(by_id[call_id] for call_id in call_ids)]
    if assistant.content.strip():
        return [ChatMessage(role="assistant", content=assistant.content)]
    return []


def _first_reply_per_call(
    call_ids: list[str], replies: list[ChatMessage]
) -> dict[str, ChatMessage]:
    by_id: dict[str, ChatMessage] = {}
    for reply in replies:
        if reply.tool_call_id in call_ids and reply.tool_call_id not in by_id:
            by_id[reply.tool_call_id] = reply
    return by_id


def _batch_is_complete(
    call_ids: list[str], by_id: dict[str, ChatMessage], seen_ids: set[str]
) -> bool:
    """Every call answered, no id twice in the batch or used by an earlier batch."""
    return (
        len(set(call_ids)) == len(call_ids)
        and not seen_ids.intersection(call_ids)
        and all(call_id in by_id for call_id in call_ids)
    )


def persisted_call_ids(records: Iterable[dict[str, Any]]) -> set[str]:
    """Every provider call id the session has used, for duplicate detection."""
    ids: set[str] = set()
    for record in records:
        calls = record.get("tool_calls") or []
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id"):
                ids.add(str(call["id"]))
    return ids


def fold_title(text: str, limit: int = 80) -> str:
    return " ".join(text.split())[:limit]
