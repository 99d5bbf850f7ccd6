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
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from agent_lab.application.events import ResultPolicy
from agent_lab.application.tool_arguments import compiled_validator, unreadable_arguments
from agent_lab.application.tool_workers import ToolOverloaded, ToolTimedOut, run_handler
from agent_lab.domain.errors import UsageError
from agent_lab.domain.events import (
    EVENT_BLOCK_END,
    EVENT_BLOCK_START,
    TOOL_NAME_PATTERN,
    ToolCallEvent,
)
from agent_lab.domain.json_values import json_text
from agent_lab.domain.messages import ChatMessage, Role

if TYPE_CHECKING:
    from agent_lab.application.builtin_backends import BuiltinBackends

ToolPayload: TypeAlias = dict[str, Any]
ToolHandler: TypeAlias = Callable[..., Any]
"""``handler(event)`` or ``handler(event, context)``, sync or async, returning a dict."""
ArgumentResolver: TypeAlias = Callable[..., Any]
"""``resolver(event, context) -> dict`` (sync or async): arguments from the history."""

DEFAULT_TOOL_TIMEOUT_SECONDS = 30.0
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


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

    def latest_text(self, role: Role) -> str | None:
        """The newest non-blank content of ``role``, skipping event-agent result messages."""
        for message in reversed(self.history):
            if message.role == role and message.name != "event_agent" and message.content.strip():
                return message.content
        return None


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

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _TOOL_NAME.fullmatch(self.name) is None:
            raise ValueError(
                f"tool name {self.name!r}: use 1 to 64 letters, digits, '_', '.' or '-' "
                "(not starting with '.' or '-'), as an event block names it"
            )

    @functools.cached_property
    def validator(self) -> Draft202012Validator:
        """The argument validator; the schema is checked once per definition.

        Raises:
            jsonschema.exceptions.SchemaError: ``parameters`` is not a valid JSON schema.
        """
        return compiled_validator(self.parameters)

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
    ran: bool = True
    """False when the registry answered without calling the handler (unknown or
    disabled tool, arguments that do not fit)."""


class ToolRegistry:
    """Holds tool definitions; validates arguments and runs handlers safely."""

    def __init__(self, tools: Iterable[ToolDefinition] = ()) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._shared = False
        """``_tools`` is shared with other registries (copied before a change)."""
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools named {tool.name!r}: each name is one tool")
            self.register(tool)

    @classmethod
    def _sharing(cls, tools: dict[str, ToolDefinition]) -> ToolRegistry:
        """A registry over ``tools``, an already-checked mapping shared by others."""
        registry = cls()
        registry._tools, registry._shared = tools, True
        return registry

    def copy(self) -> ToolRegistry:
        """A registry of the same tools; registering into either leaves the other as is."""
        self._shared = True
        return ToolRegistry._sharing(self._tools)

    def register(self, tool: ToolDefinition) -> None:
        """Add a tool; its schema must be a valid JSON schema (checked once per definition).

        A tool of the same name is replaced, so a built-in can be swapped for your own.

        Raises:
            jsonschema.exceptions.SchemaError: the schema is invalid.
        """
        tool.validator  # noqa: B018 - checks the schema, once per definition
        if self._shared:  # this registry's own copy from now on
            self._tools, self._shared = dict(self._tools), False
        self._tools[tool.name] = tool

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
        validator = self._tools[name].validator
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
        except asyncio.CancelledError:
            raise
        except BaseException:  # noqa: BLE001 - even SystemExit only means "unresolved"
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
            return _refusal(event.name, "unknown tool")
        if enabled_names is not None and event.name not in enabled_names:
            return _refusal(event.name, "tool disabled")
        problem = unreadable_arguments(event) or self.validation_error(event.name, event.arguments)
        if problem is not None:
            return _refusal(event.name, f"invalid arguments: {problem}")
        try:
            result = await run_handler(
                tool.name,
                tool.handler,
                event,
                context or ToolExecutionContext(),
                tool.timeout_seconds,
            )
        except ToolOverloaded as exc:  # refused: the handler was not called
            return _refusal(event.name, f"tool handler failed: {exc}")
        except ToolTimedOut as exc:
            return _failure(event.name, f"tool handler failed: {exc}")
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: a payload, not an exit
            return _failure(event.name, f"tool handler failed: {_describe(exc)}")
        return _outcome(tool, event, result)


def _outcome(tool: ToolDefinition, event: ToolCallEvent, result: Any) -> ToolOutcome:
    payload = result if isinstance(result, dict) else {"tool": event.name, "result": result}
    try:
        payload = json_payload(payload)
    except UsageError as exc:
        return _failure(event.name, f"tool handler failed: {exc}")
    if "error" in payload:
        return ToolOutcome(payload=payload, ok=False)
    return ToolOutcome(payload=payload, ok=True, confirmation=tool.confirm(event.arguments))


def json_payload(payload: dict[str, Any]) -> ToolPayload:
    """``payload`` as plain JSON values, converted the way the session store converts them.

    Datetimes become ISO-8601 text, sets and tuples lists, dataclasses and pydantic
    models objects, enums their values and paths strings.

    Raises:
        UsageError: a value JSON cannot hold (e.g. bytes, a tuple key, an arbitrary object).
    """
    loaded: ToolPayload = json.loads(json_text(payload, "the tool result"))
    return loaded


def _describe(exc: BaseException) -> str:
    if isinstance(exc, Exception):
        return str(exc)
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


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


def _refusal(name: str, error: str) -> ToolOutcome:
    """A failure the registry answers itself: the handler was never called."""
    return ToolOutcome(payload={"tool": name, "error": error}, ok=False, ran=False)


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    result = function(*args)
    if inspect.isawaitable(result):
        return await result
    return result


def build_default_tool_registry(
    backends: BuiltinBackends | None = None, *, home: Path | None = None
) -> ToolRegistry:
    """A registry with the built-in tools, yours to register more tools into.

    Cheap to call once per session: the definitions are shared (immutable) and their
    schemas were checked once.

    Args:
        backends: Storage and search backends for the built-ins; by default the
            registered defaults (``agent_lab.defaults``): SQLite files and a search
            index under ``home``.
        home: Where the default backends keep their state. ``None`` means
            ``AGENT_LAB_HOME`` when set, else the platform's user data directory
            (``~/.local/share/agent-lab`` on Linux). Ignored when ``backends`` is given.
    """
    return shared_default_tool_registry(backends, home=home).copy()


def shared_default_tool_registry(
    backends: BuiltinBackends | None = None, *, home: Path | None = None
) -> ToolRegistry:
    """The built-in tools' registry, one object per process and set of backends: for
    readers only (register into a ``copy()``). Arguments as for
    ``build_default_tool_registry``."""
    from agent_lab.application.builtin_tools import builtin_tool_definitions

    definitions = builtin_tool_definitions(backends, home=home)
    key = tuple(map(id, definitions))  # the registry keeps them alive: ids stay theirs
    shared = _DEFAULT_TOOLS.get(key)
    if shared is None:
        shared = ToolRegistry(definitions)
        if len(_DEFAULT_TOOLS) >= 64:
            _DEFAULT_TOOLS.clear()
        _DEFAULT_TOOLS[key] = shared
    return shared


_DEFAULT_TOOLS: dict[tuple[int, ...], ToolRegistry] = {}
"""The built-in tools' registry per set of definitions (the same backends give the same
definitions): shared by the runtimes with the default tools, and its mapping by every
registry built from it until that one registers a tool of its own."""
