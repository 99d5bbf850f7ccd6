"""How an event gets its arguments outside the model call: its resolver, and the words
for what went wrong (the event agent's helpers)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from agent_lab.application.tools import ToolExecutionContext
from agent_lab.domain.events import ToolCallEvent


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
