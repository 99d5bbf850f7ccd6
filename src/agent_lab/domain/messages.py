"""Chat messages, token usage and the items a chat client streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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


@dataclass(slots=True)
class StreamItem:
    """One item of a chat client's stream (treat it as immutable).

    Not a frozen dataclass on purpose: one is built per provider chunk, and a frozen
    dataclass's constructor costs about five times as much.

    Build items with the constructors; which field is set depends on ``kind``:
    ``raw_chunk`` → ``chunk``; ``message_delta`` → ``content``; ``usage`` → ``usage``;
    ``text_event`` / ``provider_tool_call`` / ``event`` → ``tool_call``.
    """

    kind: StreamItemKind
    content: str = ""
    tool_call: ToolCallEvent | None = None
    usage: TokenUsage | None = None
    chunk: dict[str, Any] | None = None
    raw_json: bytes | None = None
    """``raw_chunk`` items from a wire client: the chunk's JSON text, so a consumer that
    keeps chunks for later can hold bytes rather than many small objects."""

    @classmethod
    def raw_response_chunk(cls, chunk: dict[str, Any], raw_json: bytes | None = None) -> StreamItem:
        """The provider's chunk as a plain dict, exactly as it was sent."""
        return cls("raw_chunk", chunk=chunk, raw_json=raw_json)

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
        return cls("text_event", tool_call=event)

    @classmethod
    def provider_tool_call(cls, event: ToolCallEvent) -> StreamItem:
        """A complete provider function call (``chat_agent_tools`` mode)."""
        return cls("provider_tool_call", tool_call=event)

    @classmethod
    def event(cls, event: ToolCallEvent) -> StreamItem:
        """Legacy event item; the runtime ignores it."""
        return cls("event", tool_call=event)
