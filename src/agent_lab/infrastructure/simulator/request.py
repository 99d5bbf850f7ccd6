"""Parses and validates an OpenAI chat-completions request body for the simulator."""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

RESULTS_PREFIX = "EventAgent results:"
RECOVERED_PREFIX = "Recovered tool results:"
"""A runtime's system note with the results of calls an interruption cut off."""
EVENT_AGENT_NAME = "event_agent"


class InvalidRequest(Exception):
    """The body is not a valid chat-completions request (answered with HTTP 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        self.message = message
        self.param = param
        super().__init__(message)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class FunctionCall(_Lenient):
    name: str = ""
    arguments: str = ""


class MessageToolCall(_Lenient):
    id: str = ""
    type: str = "function"
    function: FunctionCall = Field(default_factory=FunctionCall)


class Message(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[MessageToolCall] | None = None

    @property
    def text(self) -> str:
        """The message's text; text parts of a multi-part content are joined."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(part.get("text", "")) for part in self.content)

    @property
    def is_results(self) -> bool:
        """True for the dual-mode ``EventAgent results:`` message, and for a system note
        of recovered tool results (``chat_agent_tools`` after an interruption)."""
        if self.role == "system":
            return self.text.startswith(RECOVERED_PREFIX)
        return self.role == "user" and (
            self.name == EVENT_AGENT_NAME or self.text.startswith(RESULTS_PREFIX)
        )


class FunctionSpec(_Lenient):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] | None = None


class ToolSpec(_Lenient):
    type: Literal["function"] = "function"
    function: FunctionSpec


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatRequest(_Lenient):
    model: str = "agent-lab-sim"
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None

    @field_validator("messages")
    @classmethod
    def _unfold_results(cls, messages: list[Message]) -> list[Message]:
        """The runtime's client folds user messages in a row into one (for servers that
        want roles to alternate); the simulator reads an ``EventAgent results:`` part
        of such a message as the results message it was."""
        return [part for message in messages for part in _unfolded(message)]

    @field_validator("tool_choice")
    @classmethod
    def _check_tool_choice(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(value, str) and value not in ("none", "auto", "required"):
            raise ValueError("must be 'none', 'auto', 'required' or a function object")
        if isinstance(value, dict) and not _forced_name_of(value):
            raise ValueError("a function tool_choice needs function.name")
        return value

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def forced_name(self) -> str | None:
        """The function named by a forced ``tool_choice``, if any."""
        if isinstance(self.tool_choice, dict):
            return _forced_name_of(self.tool_choice)
        return None


def _forced_name_of(choice: dict[str, Any]) -> str | None:
    function = choice.get("function")
    if choice.get("type") != "function" or not isinstance(function, dict):
        return None
    name = function.get("name")
    return name if isinstance(name, str) and name else None


def parse_request(body: bytes) -> tuple[ChatRequest, dict[str, Any]]:
    """Validate a request body.

    Returns:
        The typed request and the raw JSON object (kept for recording).

    Raises:
        InvalidRequest: the body is not JSON, not an object, or not a valid request.
    """
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"We could not parse the JSON body of your request: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    try:
        request = ChatRequest.model_validate(raw)
    except ValidationError as exc:
        raise _invalid_from(exc) from exc
    _check_forced_tool_offered(request)
    return request, raw


def _invalid_from(exc: ValidationError) -> InvalidRequest:
    error = exc.errors()[0]
    param = ".".join(str(part) for part in error["loc"])
    return InvalidRequest(f"Invalid value for '{param}': {error['msg']}", param=param)


def _check_forced_tool_offered(request: ChatRequest) -> None:
    name = request.forced_name
    if name is None:
        return
    offered = [tool.function.name for tool in request.tools or []]
    if name not in offered:
        raise InvalidRequest(
            f"Invalid value for 'tool_choice': function '{name}' is not in 'tools'.",
            param="tool_choice",
        )


def _unfolded(message: Message) -> list[Message]:
    text = message.content
    if message.role != "user" or not isinstance(text, str) or RESULTS_PREFIX not in text:
        return [message]
    parts: list[Message] = []
    for part in text.split("\n\n"):
        results = part.startswith(RESULTS_PREFIX)
        if not results and parts and not parts[-1].is_results:  # one user text, rejoined
            parts[-1] = Message(role="user", content=f"{parts[-1].text}\n\n{part}")
        else:
            name = EVENT_AGENT_NAME if results else None
            parts.append(Message(role="user", content=part, name=name))
    return parts
