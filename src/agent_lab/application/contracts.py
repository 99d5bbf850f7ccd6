"""The request a user hands the runtime, and the parameters of its two agents."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_lab.domain.errors import InvalidRequest, UnknownTools
from agent_lab.domain.messages import ChatMessage

ToolInvocationMode = Literal["dual_agent", "chat_agent_tools"]

MAX_EVENT_LOOPS = 32
"""The largest ``max_event_loops`` a request may ask for."""

DEFAULT_EVENT_AGENT_PROMPT = (
    "You fill in the arguments of exactly one tool call for the conversation so far. "
    "Use only facts stated in the conversation."
)


class AgentParams(BaseModel):
    """Model parameters of the chat agent (and the base of the event agent's)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    """The model name sent to the endpoint."""

    @field_validator("model")
    @classmethod
    def _model_is_not_blank(cls, value: str | None) -> str | None:
        return _not_blank(value)

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    system_prompt: str = ""
    """An extra system prompt for this agent, sent after the request's system prompts."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific request fields, sent as they are."""


class EventAgentParams(BaseModel):
    """Parameters of the event agent and of tool execution in both modes."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, min_length=1)
    """Model for forced argument calls; ``None`` uses the chat agent's model."""

    @field_validator("model")
    @classmethod
    def _model_is_not_blank(cls, value: str | None) -> str | None:
        return _not_blank(value)

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=256, gt=0)
    enabled_tools: list[str] = Field(default_factory=list)
    """Registry names of the tools the agents may use, in the order they are offered."""
    max_event_loops: int = Field(default=3, ge=0, le=MAX_EVENT_LOOPS)
    """Rounds per user turn that may run tools; the budget resets every turn (at most
    ``MAX_EVENT_LOOPS``)."""
    max_parallel_events: int = Field(default=8, ge=1)
    """How many tools of one batch run at the same time."""
    system_prompt: str = DEFAULT_EVENT_AGENT_PROMPT
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_validator("enabled_tools")
    @classmethod
    def _tools_are_listed_once(cls, names: list[str]) -> list[str]:
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"lists {', '.join(map(repr, twice))} more than once")
        return names


class DebugRunRequest(BaseModel):
    """Everything one run or session needs, except connection secrets."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Persist under this id (and continue it if it exists); ``None`` for a fresh id."""
    user_message: str = ""
    """The first user turn; in session mode an empty message waits for input instead."""
    system_prompts: list[str] = Field(default_factory=list)
    pre_messages: list[ChatMessage] = Field(default_factory=list)
    """Configured messages placed after the system prompts and before the history."""
    chat_agent: AgentParams
    event_agent: EventAgentParams = Field(default_factory=EventAgentParams)
    tool_invocation_mode: ToolInvocationMode = "dual_agent"

    @field_validator("session_id")
    @classmethod
    def _session_id_is_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be blank (whitespace only); omit it for a fresh id")
        return value

    @model_validator(mode="after")
    def _text_is_valid_unicode(self) -> Self:
        problem = unicode_problem(self)
        if problem is not None:
            raise ValueError(f"{problem[0]}: {problem[1]}")
        return self


def _not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be blank (whitespace only)")
    return value


def check_runnable(
    request: DebugRunRequest, tool_names: Sequence[str], *, one_shot: bool = False
) -> None:
    """What a runtime checks before it starts ``request`` (and writes anything).

    The request model validates itself, but ``model_copy(update=...)`` skips that, and
    only the runtime knows its tool registry.

    Raises:
        UnknownTools: ``event_agent.enabled_tools`` names tools not in ``tool_names``;
            the error lists them with their close matches.
        InvalidRequest: a string of the request is not valid Unicode (a lone surrogate
            cannot be stored or sent), a value is not one JSON can hold (in
            ``extra_body``), ``session_id`` is blank, or a one-shot run (``one_shot``)
            has no user message.
    """
    if request.session_id is not None and not request.session_id.strip():
        raise InvalidRequest("session_id", "must not be blank (whitespace only)")
    problem = unicode_problem(request)
    if problem is not None:
        raise InvalidRequest(*problem)
    unknown = [name for name in request.event_agent.enabled_tools if name not in tool_names]
    if unknown:
        close = {name: difflib.get_close_matches(name, tool_names, n=2) for name in unknown}
        raise UnknownTools(unknown, close, list(tool_names))
    if one_shot and not request.user_message.strip():
        raise InvalidRequest(
            "user_message", "is empty: a one-shot run answers a message (a session waits for one)"
        )


def check_text(field: str, value: str | ChatMessage) -> None:
    """Raises ``InvalidRequest`` when a user message is not valid Unicode."""
    dumped = value if isinstance(value, str) else value.model_dump()
    problem = _first_surrogate(dumped, field)
    if problem is not None:
        raise InvalidRequest(*problem)


def unicode_problem(request: BaseModel) -> tuple[str, str] | None:
    """The first value of ``request`` that cannot be stored or sent: a string holding a
    lone surrogate, or (in ``extra_body``) a value JSON cannot hold. Its field and the
    problem.

    Valid requests, nearly all, pass one JSON serialization (which refuses both); only a
    refused one is walked value by value to name the field.
    """
    try:
        request.model_dump_json()
    except ValueError:  # a lone surrogate, or a value JSON cannot hold: look closer
        return _first_surrogate(request.model_dump(), "") or ("request", "not JSON")
    return None


def _first_surrogate(value: object, where: str) -> tuple[str, str] | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            point = f"U+{ord(value[exc.start]):04X}"
            return where or "value", f"not valid Unicode (a lone surrogate {point} at {exc.start})"
        return None
    if isinstance(value, dict):
        items: list[tuple[object, object]] = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    elif value is None or isinstance(value, int | float):
        return None
    else:
        return where or "value", f"not a JSON value ({type(value).__name__})"
    for key, item in items:
        # The path must print even when the key itself is the broken string.
        inner = f"{where}.{key}" if where else str(key)
        inner = inner.encode("utf-8", "backslashreplace").decode("utf-8")
        found = _first_surrogate(key, inner) or _first_surrogate(item, inner)
        if found is not None:
            return found
    return None
