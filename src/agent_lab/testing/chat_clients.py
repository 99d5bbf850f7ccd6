"""Chat clients for tests: scripted rounds, or a model written as a function.

For example::

    client = ScriptedChatClient([
        [StreamItem.message_delta("Checking."), StreamItem.text_event(event)],
        [StreamItem.message_delta("Done.")],
    ])
    outputs = [m async for m in DebugRuntime(client).run(request)]
    client.assert_complete()
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.errors import AgentLabError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem, TokenUsage


class UnexpectedModelCall(AgentLabError):
    """A scripted client was called more often than it has rounds."""


class UnconsumedRounds(AgentLabError):
    """``assert_complete`` found scripted rounds nobody asked for."""


@dataclass(frozen=True)
class RecordedCall:
    """One call a test client received."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    params: AgentParams
    tool_choice: dict[str, Any] | None

    @property
    def forced_tool(self) -> str | None:
        """The tool a forced ``tool_choice`` names, if any."""
        if not self.tool_choice:
            return None
        function = self.tool_choice.get("function") or {}
        name = function.get("name")
        return name if isinstance(name, str) else None


Round: TypeAlias = Sequence[StreamItem] | BaseException


class _RecordingClient:
    """A test chat client: records every call in ``calls``, then ``_answer``s it."""

    calls: list[RecordedCall]

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        call = RecordedCall(list(messages), list(tools), params, tool_choice)
        self.calls.append(call)
        async for item in self._answer(call):
            yield item

    def _answer(self, call: RecordedCall) -> AsyncIterator[StreamItem]:
        """The items of the call's stream."""
        raise NotImplementedError


@dataclass
class ScriptedChatClient(_RecordingClient):
    """Replays one scripted round per call and records every call.

    A round is a list of ``StreamItem``s, or an exception to raise instead (e.g. a
    ``ProviderError``). Forced-tool-choice calls (the event agent's argument calls) take
    rounds from ``argument_rounds`` when given, so chat rounds stay in order.
    """

    rounds: list[Round]
    argument_rounds: list[Round] | None = None
    calls: list[RecordedCall] = field(default_factory=list)
    _next: int = 0
    _next_argument: int = 0

    async def _answer(self, call: RecordedCall) -> AsyncIterator[StreamItem]:
        scripted = self._take(call)
        if isinstance(scripted, BaseException):
            raise scripted
        for item in scripted:
            yield item

    def _take(self, call: RecordedCall) -> Round:
        if call.forced_tool is not None and self.argument_rounds is not None:
            if self._next_argument >= len(self.argument_rounds):
                raise UnexpectedModelCall(f"no argument round left for call {len(self.calls)}")
            self._next_argument += 1
            return self.argument_rounds[self._next_argument - 1]
        if self._next >= len(self.rounds):
            raise UnexpectedModelCall(
                f"call {len(self.calls)} has no scripted round ({len(self.rounds)} given)"
            )
        self._next += 1
        return self.rounds[self._next - 1]

    @property
    def chat_calls(self) -> list[RecordedCall]:
        return [call for call in self.calls if call.forced_tool is None]

    @property
    def argument_calls(self) -> list[RecordedCall]:
        return [call for call in self.calls if call.forced_tool is not None]

    def assert_complete(self) -> None:
        """Raise ``UnconsumedRounds`` unless every scripted round was used."""
        left = len(self.rounds) - self._next
        left_arguments = len(self.argument_rounds or []) - self._next_argument
        if left or left_arguments:
            raise UnconsumedRounds(
                f"{left} chat round(s) and {left_arguments} argument round(s) were never used"
            )


ModelFunction: TypeAlias = Callable[
    [RecordedCall], Iterable[StreamItem] | AsyncIterator[StreamItem] | Awaitable[Any]
]


@dataclass
class FunctionChatClient(_RecordingClient):
    """A model written as a function of the call: return or yield ``StreamItem``s."""

    function: ModelFunction
    calls: list[RecordedCall] = field(default_factory=list)

    async def _answer(self, call: RecordedCall) -> AsyncIterator[StreamItem]:
        produced: Any = self.function(call)
        if inspect.isawaitable(produced):
            produced = await produced
        if hasattr(produced, "__aiter__"):
            async for item in produced:
                yield item
            return
        for item in produced:
            yield item


def text(*parts: str, usage: TokenUsage | None = None) -> list[StreamItem]:
    """A round that says ``parts`` as deltas (and reports ``usage``)."""
    items = [StreamItem.message_delta(part) for part in parts]
    if usage is not None:
        items.append(StreamItem.usage_item(usage))
    return items


def tool_call(call_id: str, name: str, **arguments: Any) -> StreamItem:
    """A provider tool call item."""
    import json

    return StreamItem.provider_tool_call(
        ToolCallEvent(
            id=call_id, name=name, arguments=arguments, raw_arguments=json.dumps(arguments)
        )
    )


def text_event(call_id: str, name: str) -> StreamItem:
    """An inline event block item (``dual_agent``)."""
    return StreamItem.text_event(ToolCallEvent(id=call_id, name=name))
