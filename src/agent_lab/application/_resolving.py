"""How an event gets its arguments: its resolver, or the answer of a forced call read
item by item, and the words for what went wrong (the event agent's helpers)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application.tool_arguments import unreadable_arguments
from agent_lab.application.tools import ToolExecutionContext
from agent_lab.domain.events import CutOffToolCall, ToolCallEvent


def resolver_name(resolver: Callable[..., Any] | None) -> str | None:
    if resolver is None:
        return None
    target = getattr(resolver, "func", resolver)  # a functools.partial names its function
    name = getattr(target, "__qualname__", None) or type(target).__name__
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module else str(name)


async def resolve_with(
    resolver: Callable[..., Any], event: ToolCallEvent, context: ToolExecutionContext
) -> dict[str, Any] | None:
    resolved = resolver(event, context)
    if inspect.isawaitable(resolved):
        resolved = await resolved
    return resolved if isinstance(resolved, dict) else None


def excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:80] + "…"


def cause(exc: BaseException) -> str:
    failure_reason = getattr(exc, "failure_reason", None)
    text = str(exc) or type(exc).__name__
    return f"{text} ({failure_reason})" if failure_reason else f"{type(exc).__name__}: {text}"


def with_arguments(
    event: ToolCallEvent, arguments: dict[str, Any], written: str | None = None
) -> ToolCallEvent:
    """The event with its resolved arguments; ``written``: the model's argument text,
    when it was not a JSON object (the registry then says why it cannot run)."""
    return ToolCallEvent(
        id=event.id,
        name=event.name,
        arguments=arguments,
        raw_arguments=written if written is not None else json.dumps(arguments, ensure_ascii=False),
    )


@dataclass(slots=True)
class ForcedAnswer:
    """What a forced call (``tool_choice`` naming ``tool``) answered, taken item by item."""

    tool: str
    arguments: dict[str, Any] | str | None = None
    """The call's arguments; the model's text when they are not a JSON object."""
    problem: str | None = None
    text: list[str] = field(default_factory=list)
    """Visible text the model wrote instead of (or beside) the call."""

    def take_call(self, generated: ToolCallEvent) -> None:
        if generated.name != self.tool:  # a provider that ignores tool_choice
            self.problem = self.problem or f"the model called {generated.name} instead"
            return
        if isinstance(generated, CutOffToolCall):  # half-written: never run
            self.problem = self.problem or generated.cut_off_reason
        unreadable = unreadable_arguments(generated) is not None
        self.arguments = generated.raw_arguments if unreadable else dict(generated.arguments)

    def outcome(self) -> tuple[dict[str, Any] | str, str | None]:
        """The arguments, and the cause when there are none to run the tool with."""
        written = "".join(self.text)
        problem = self.problem
        if self.arguments is None and problem is None and written.strip():
            problem = f"the model answered with text, not a call: {excerpt(written)!r}"
        return self.arguments or {}, problem
