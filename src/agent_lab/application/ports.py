"""Ports the application awaits: the model (``ChatClient``) and the clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeAlias

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.messages import ChatMessage, StreamItem

Clock: TypeAlias = Callable[[], float]
"""Seconds from an arbitrary origin, monotonic (``time.perf_counter`` by default)."""


class ChatClient(Protocol):
    """Streams one model call as ``StreamItem``s.

    ``tools`` are OpenAI function schemas under registry names; ``tool_choice`` forces a
    call (``{"type": "function", "function": {"name": ...}}``). Iteration raises
    ``ProviderError`` subclasses for endpoint failures.
    """

    def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]: ...
