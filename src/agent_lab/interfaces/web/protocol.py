"""The WebSocket protocol of the web lab: client commands in, control frames out.

Client → server (JSON objects):

* ``{"type": "start", "request": {...}, "resume_from": n | null, "stream_id": s?,
  "connection": {"base_url": ..., "api_key": ...}?}`` — start, resume or attach.
* ``{"type": "user", "content": "..."}`` — the next user turn.
* ``{"type": "cancel"}`` — cancel the turn in progress.
* ``{"type": "close"}`` — end the live session (its runtime stops); queued turns
  are dropped.
* ``{"type": "drop_queued"}`` — drop the user turns waiting behind the running one.

Server → client: stream frames ``{"offset": n, "message": {...}}`` carrying the
runtime's output protocol (plus the ``user_message`` and ``turn_record`` frames the
hub adds), and control
frames without an offset: ``attached``, ``history``, ``detached``, ``cancelled``,
``queued``, ``dropped``, ``deleted``, ``error``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.domain.errors import InvalidRequest


class ConnectionOverride(BaseModel):
    """An endpoint and key typed into the page; used for the provider only, never kept."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    base_url: str | None = Field(default=None, max_length=2000)
    api_key: SecretStr | None = Field(default=None, max_length=4000)

    def is_empty(self) -> bool:
        return not (self.base_url or "").strip() and not self.key()

    def key(self) -> str | None:
        if self.api_key is None:
            return None
        return self.api_key.get_secret_value().strip() or None


class StartCommand(BaseModel):
    """Start a session, resume a stored one, or attach to a live one."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    type: Literal["start"]
    request: dict[str, Any] | None = None
    resume_from: int | None = Field(default=None, ge=-1)
    stream_id: str | None = Field(default=None, max_length=100)
    connection: ConnectionOverride | None = None


class UserCommand(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    type: Literal["user"]
    content: str = Field(min_length=1, max_length=100_000)


class CancelCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["cancel"]


class CloseCommand(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["close"]


class DropQueuedCommand(BaseModel):
    """Drop the user turns still waiting behind the running one."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["drop_queued"]


Command = Annotated[
    StartCommand | UserCommand | CancelCommand | CloseCommand | DropQueuedCommand,
    Field(discriminator="type"),
]
_COMMANDS: TypeAdapter[Command] = TypeAdapter(Command)
COMMAND_TYPES: tuple[str, ...] = tuple(
    get_args(model.model_fields["type"].annotation)[0] for model in get_args(get_args(Command)[0])
)
"""``start``, ``user``, ``cancel``, ``close``, ``drop_queued``."""


class ProtocolError(ValueError):
    """A client message that cannot be used; the text is safe to send back.

    ``field`` is the dotted path of the (first) offending field, when there is one.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def parse_command(text: str) -> Command:
    """Parse one client message.

    Raises:
        ProtocolError: not JSON, an unknown ``type``, or invalid fields. The message
            names the fields but never repeats their values (they may hold a key).
    """
    try:
        return _COMMANDS.validate_json(text)
    except ValidationError as exc:
        raise ProtocolError(describe(exc, None), first_field(exc, None)) from None


def run_request(command: StartCommand, session_id: str) -> DebugRunRequest:
    """The start command's request, validated, with ``session_id`` forced to the path id.

    Raises:
        ProtocolError: the request is missing or not a valid ``DebugRunRequest``.
    """
    if command.request is None:
        raise ProtocolError("request: required to start a session", "request")
    fields = {**command.request, "session_id": session_id}
    try:
        return DebugRunRequest.model_validate(fields)
    except ValidationError as exc:
        raise ProtocolError(describe(exc, "request"), first_field(exc, "request")) from None


def request_error(exc: InvalidRequest) -> ProtocolError:
    """A request the runtime refuses (an unknown tool…), said as a validation error is:
    ``invalid request — request.event_agent.enabled_tools: unknown tool(s) …``."""
    field = f"request.{exc.field}"
    return ProtocolError(f"invalid request — {field}: {exc.problem}", field)


_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


def describe(exc: ValidationError, what: str | None) -> str:
    """``invalid what — field: problem; ...`` without the offending input values.

    Without ``what`` (a whole command) the paths are the command's own fields
    (``content``, ``connection.base_url``), ``type`` or ``message`` (not JSON, not an
    object).
    """
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        problems.append(f"{_path(error, what)}: {_problem(error)}")
    return "invalid " + (what or "message") + " — " + "; ".join(problems)


def first_field(exc: ValidationError, what: str | None) -> str:
    """The dotted path of the first invalid field (``request.chat_agent.temperature``,
    ``content``), as ``describe`` names it."""
    errors = exc.errors(include_input=False, include_url=False)
    if not errors:
        return what or "message"
    return _path(errors[0], what)


def _path(error: ErrorDetails, what: str | None) -> str:
    loc = [str(part) for part in error["loc"]]
    if what is not None:
        return ".".join([what, *loc])
    if error["type"] in _TAG_ERRORS:
        return "type"
    return ".".join(loc[1:]) or "message"  # loc[0] is the command's type


def _problem(error: ErrorDetails) -> str:
    if error["type"] in _TAG_ERRORS:  # pydantic's text repeats the tag that was sent
        expected = ", ".join(repr(name) for name in COMMAND_TYPES)
        return f"unknown or missing message type; expected one of {expected}"
    return error["msg"]


def error_frame(
    message: str, field: str | None = None, *, reason: tuple[str, str] | None = None
) -> dict[str, Any]:
    """``{"type": "error", "message", "field"?, "failure_reason"?, "exit_class"?}``:
    ``field`` names what to fix; ``reason`` is the runtime's ``(failure_reason,
    exit_class)`` of a session that could not start (``("session_busy", "usage")``)."""
    frame: dict[str, Any] = {"type": "error", "message": message}
    if field is not None:
        frame["field"] = field
    if reason is not None:
        frame["failure_reason"], frame["exit_class"] = reason
    return frame
