"""Chat messages, token usage and the items a chat client streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

from pydantic import BaseModel, Field

from agent_lab.domain.events import ToolCallEvent

Role = Literal["system", "user", "assistant", "tool"]


class ChatMessage(BaseModel):
    """One message of a conversation; ``model_dump()`` has exactly five keys."""

    role: Role
    content: str = ""
    name: str | None = None
    """For ``tool`` messages the tool name; ``event_agent`` for event-agent result messages."""
    tool_call_id: str | None = None
    """For ``tool`` messages, the id of the call it answers."""
    tool_calls: list[ToolCallEvent] = Field(default_factory=list)
    """For ``assistant`` messages in ``chat_agent_tools`` mode, the calls it made."""


class TokenUsage(BaseModel):
    """Token counts of one model call, as the provider reported them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


StreamItemKind = Literal[
    "raw_chunk", "message_delta", "usage", "text_event", "provider_tool_call", "event"
]


class _EventAttribute:
    """``StreamItem.event``: the legacy constructor on the class, the event on an item.

    The original API uses one name for both: ``StreamItem.event(e)`` builds a legacy
    event item, and ``item.event`` is the item's ``ToolCallEvent`` (or ``None``).
    """

    @overload
    def __get__(
        self, obj: None, owner: type[StreamItem]
    ) -> Callable[[ToolCallEvent], StreamItem]: ...

    @overload
    def __get__(self, obj: StreamItem, owner: type[StreamItem]) -> ToolCallEvent | None: ...

    def __get__(
        self, obj: StreamItem | None, owner: type[StreamItem]
    ) -> Callable[[ToolCallEvent], StreamItem] | ToolCallEvent | None:
        if obj is None:
            return owner.legacy_event
        return obj._event


class StreamItem:
    """One item of a chat client's stream (treat it as immutable).

    A plain slotted class on purpose: one is built per provider chunk, and a frozen
    dataclass's constructor costs about five times as much.

    Build items with the constructors; which attribute is set depends on ``kind``:
    ``raw_chunk`` → ``raw_chunk`` (and ``raw_json``); ``message_delta`` → ``content``;
    ``usage`` → ``usage``; ``text_event`` / ``provider_tool_call`` / ``event`` → ``event``.
    """

    __slots__ = ("_event", "content", "kind", "raw_chunk", "raw_json", "usage")

    event = _EventAttribute()

    def __init__(
        self,
        kind: StreamItemKind,
        content: str = "",
        event: ToolCallEvent | None = None,
        usage: TokenUsage | None = None,
        raw_chunk: dict[str, Any] | None = None,
        raw_json: bytes | None = None,
    ) -> None:
        self.kind = kind
        self.content = content
        self._event = event
        self.usage = usage
        self.raw_chunk = raw_chunk
        self.raw_json = raw_json
        """``raw_chunk`` items from a wire client: the chunk's JSON text, so a consumer
        that keeps chunks for later can hold bytes rather than many small objects."""

    def __repr__(self) -> str:
        return (
            f"StreamItem(kind={self.kind!r}, content={self.content!r}, event={self._event!r}, "
            f"usage={self.usage!r}, raw_chunk={self.raw_chunk!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StreamItem):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.content == other.content
            and self._event == other._event
            and self.usage == other.usage
            and self.raw_chunk == other.raw_chunk
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def raw_response_chunk(cls, chunk: dict[str, Any], raw_json: bytes | None = None) -> StreamItem:
        """The provider's chunk as a plain dict, exactly as it was sent."""
        return cls("raw_chunk", raw_chunk=chunk, raw_json=raw_json)

    @classmethod
    def message_delta(cls, content: str) -> StreamItem:
        """Visible answer text."""
        return cls("message_delta", content=content)

    @classmethod
    def usage_item(cls, usage: TokenUsage) -> StreamItem:
        """The call's token usage."""
        return cls("usage", usage=usage)

    @classmethod
    def text_event(cls, event: ToolCallEvent) -> StreamItem:
        """An event named in an inline event block (``dual_agent`` mode)."""
        return cls("text_event", event=event)

    @classmethod
    def provider_tool_call(cls, event: ToolCallEvent) -> StreamItem:
        """A complete provider function call (``chat_agent_tools`` mode)."""
        return cls("provider_tool_call", event=event)

    @classmethod
    def legacy_event(cls, event: ToolCallEvent) -> StreamItem:
        """Legacy event item (also spelt ``StreamItem.event(e)``); the runtime ignores it."""
        return cls("event", event=event)
