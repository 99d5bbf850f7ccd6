"""Tools: definitions, the registry that validates and runs them, and its error payloads.

Errors are payloads, never exceptions: ``execute_async`` always returns a dict, and a
failure is ``{"tool": name, "error": "unknown tool" | "tool disabled" |
"tool handler failed: <message>" | "invalid arguments: <why>"}``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agent_lab.application.events import ResultPolicy
from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START, ToolCallEvent
from agent_lab.domain.messages import ChatMessage

if TYPE_CHECKING:
    from agent_lab.application.builtin_tools import BuiltinBackends

ToolPayload: TypeAlias = dict[str, Any]
ToolHandler: TypeAlias = Callable[..., Any]
"""``handler(event)`` or ``handler(event, context)``, sync or async, returning a dict."""
ArgumentResolver: TypeAlias = Callable[..., Any]
"""``resolver(event, context) -> dict`` (sync or async): arguments from the history."""

DEFAULT_TOOL_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class ToolExecutionContext:
    """What a resolver or handler may know about the conversation."""

    history: list[ChatMessage] = field(default_factory=list)
    """User and assistant messages, ending with the current round's assistant message."""
    session_id: str | None = None
    turn_index: int = 0
    round_index: int = 0
    idempotency_key: str | None = None
    """Handlers: the call's key, stable and unique per session and call, journaled with
    it before it runs (DESIGN.md §9.4); ``None`` for resolvers, which see no one call."""


@dataclass(frozen=True)
class ToolDefinition:
    """A tool the agents may call.

    Attributes:
        name: Registry name (may contain dots; providers see an alias).
        description: One line shown to the models.
        parameters: JSON schema of the arguments; validated before the handler runs.
        handler: ``handler(event)`` or ``handler(event, context)``, sync or async.
        argument_resolver: Resolves arguments from the history without a model call.
        result_policy: What happens after a batch containing this tool.
        confirmation_template: TEMPLATE policy: ``str.format`` template over the arguments.
        farewell: TERMINATE policy: what to say when the chat agent said nothing.
        timeout_seconds: A hung handler becomes an error payload after this long.
        coalesce: Identical calls in one batch run once (always true for TERMINATE).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    argument_resolver: ArgumentResolver | None = None
    result_policy: ResultPolicy = ResultPolicy.FOLLOW_UP
    confirmation_template: str | None = None
    farewell: str | None = None
    timeout_seconds: float | None = DEFAULT_TOOL_TIMEOUT_SECONDS
    coalesce: bool = False

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema under the registry name."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def confirm(self, arguments: dict[str, Any]) -> str | None:
        if self.confirmation_template is None:
            return None
        try:
            return self.confirmation_template.format(**arguments)
        except (KeyError, IndexError, ValueError):
            return self.confirmation_template


@dataclass(frozen=True)
class ToolOutcome:
    """A handler run: the payload, whether it succeeded, and a TEMPLATE confirmation."""

    payload: ToolPayload
    ok: bool
    confirmation: str | None = None


class ToolRegistry:
    """Holds tool definitions; validates arguments and runs handlers safely."""

    def __init__(self, tools: Iterable[ToolDefinition] = ()) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolDefinition) -> None:
        """Add a tool; its schema must be a valid JSON schema."""
        Draft202012Validator.check_schema(tool.parameters)
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.parameters)

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def tool_schema(self, name: str) -> dict[str, Any]:
        """The OpenAI function schema of one tool.

        Raises:
            KeyError: no tool of that name.
        """
        return self._tools[name].schema()

    def provider_tool_schemas(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """Schemas of the named tools that exist, in the given (enabled) order."""
        return [self._tools[name].schema() for name in names if name in self._tools]

    def chat_event_system_message(self, names: Sequence[str]) -> str:
        """The event catalog for the chat agent in ``dual_agent`` mode (no parameters)."""
        lines = ["Available events:"]
        lines += [f"- {name}: {self._tools[name].description}" for name in names if name in self]
        lines.append("")
        lines.append(_EVENT_INSTRUCTIONS)
        return "\n".join(lines)

    def validation_error(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the tool's schema, or ``None`` when they do."""
        validator = self._validators[name]
        error = best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    def coalesce_key(self, event: ToolCallEvent) -> str | None:
        """Calls with the same key in one batch run once; ``None`` never coalesces."""
        tool = self._tools.get(event.name)
        if tool is None:
            return None
        if tool.result_policy is ResultPolicy.TERMINATE:
            return event.name
        if tool.coalesce:
            return event.name + json.dumps(event.arguments, sort_keys=True, default=str)
        return None

    async def resolve_arguments(
        self, event: ToolCallEvent, context: ToolExecutionContext
    ) -> dict[str, Any] | None:
        """Run the tool's resolver; ``None`` when it has none or the resolver failed."""
        tool = self._tools.get(event.name)
        if tool is None or tool.argument_resolver is None:
            return None
        try:
            resolved = await _call(tool.argument_resolver, event, context)
        except Exception:
            return None
        return resolved if isinstance(resolved, dict) else None

    async def execute_async(
        self,
        event: ToolCallEvent,
        enabled_names: Sequence[str] | None = None,
        context: ToolExecutionContext | None = None,
    ) -> ToolPayload:
        """Validate and run one call; every failure comes back as an error payload."""
        outcome = await self.run(event, enabled_names, context)
        return outcome.payload

    async def run(
        self,
        event: ToolCallEvent,
        enabled_names: Sequence[str] | None = None,
        context: ToolExecutionContext | None = None,
    ) -> ToolOutcome:
        """Like ``execute_async`` but also says whether the call succeeded."""
        tool = self._tools.get(event.name)
        if tool is None:
            return _failure(event.name, "unknown tool")
        if enabled_names is not None and event.name not in enabled_names:
            return _failure(event.name, "tool disabled")
        problem = self.validation_error(event.name, event.arguments)
        if problem is not None:
            return _failure(event.name, f"invalid arguments: {problem}")
        try:
            result = await _with_timeout(tool, event, context or ToolExecutionContext())
        except TimeoutError:
            return _failure(
                event.name, f"tool handler failed: timed out after {tool.timeout_seconds:g}s"
            )
        except Exception as exc:
            return _failure(event.name, f"tool handler failed: {exc}")
        payload = result if isinstance(result, dict) else {"tool": event.name, "result": result}
        if "error" in payload:
            return ToolOutcome(payload=payload, ok=False)
        return ToolOutcome(payload=payload, ok=True, confirmation=tool.confirm(event.arguments))


_EVENT_INSTRUCTIONS = (
    "When one of these events should happen, write its name inside an event block, "
    f"exactly like {EVENT_BLOCK_START}name{EVENT_BLOCK_END}, anywhere in your reply. "
    f"Several names may share one block, separated by commas: "
    f"{EVENT_BLOCK_START}first, second{EVENT_BLOCK_END}. "
    "Put nothing but event names inside a block; the user never sees it. "
    "Keep talking to the user normally around it; the outcome of each event "
    "reaches you afterwards."
)


def _failure(name: str, error: str) -> ToolOutcome:
    return ToolOutcome(payload={"tool": name, "error": error}, ok=False)


async def _with_timeout(
    tool: ToolDefinition, event: ToolCallEvent, context: ToolExecutionContext
) -> Any:
    if tool.timeout_seconds is None:
        return await _call_handler(tool.handler, event, context)
    async with asyncio.timeout(tool.timeout_seconds):
        return await _call_handler(tool.handler, event, context)


async def _call_handler(
    handler: ToolHandler, event: ToolCallEvent, context: ToolExecutionContext
) -> Any:
    wants_context, is_async = _handler_shape(handler)
    args: tuple[Any, ...] = (event, context) if wants_context else (event,)
    if is_async:
        return await handler(*args)
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(_tool_threads(), functools.partial(handler, *args))
    if inspect.isawaitable(result):
        return await result
    return result


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    result = function(*args)
    if inspect.isawaitable(result):
        return await result
    return result


def _handler_shape(handler: ToolHandler) -> tuple[bool, bool]:
    """Whether the handler takes the context, and whether it is async."""
    try:
        return _cached_shape(handler)
    except TypeError:  # an unhashable callable object
        return _inspect_shape(handler)


@functools.lru_cache(maxsize=4096)
def _cached_shape(handler: ToolHandler) -> tuple[bool, bool]:
    return _inspect_shape(handler)


def _inspect_shape(handler: ToolHandler) -> tuple[bool, bool]:
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    )
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False, is_async
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    wants = len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)
    return wants, is_async


@functools.cache
def _tool_threads() -> ThreadPoolExecutor:
    """Sync handlers run here: enough threads for several full batches at once."""
    return ThreadPoolExecutor(max_workers=64, thread_name_prefix="agent-lab-tool")


def build_default_tool_registry(
    backends: BuiltinBackends | None = None,
) -> ToolRegistry:
    """A registry with the built-in tools, keeping state in the lab's data directory.

    Args:
        backends: Storage and search backends for the built-ins; by default the local
            ones under ``AGENT_LAB_HOME`` (see ``agent_lab.application.builtin_tools``).
    """
    from agent_lab.application.builtin_tools import builtin_tool_definitions

    return ToolRegistry(builtin_tool_definitions(backends))
