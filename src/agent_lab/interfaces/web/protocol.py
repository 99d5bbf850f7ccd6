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

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, ValidationError

from agent_lab.application.contracts import DebugRunRequest


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
        raise ProtocolError(describe(exc, "message"), first_field(exc, None)) from None


def run_request(command: StartCommand, session_id: str) -> DebugRunRequest:
    """The start command's request, validated, with ``session_id`` forced to the path id.

    Raises:
        ProtocolError: the request is missing or not a valid ``DebugRunRequest``.
    """
    if command.request is None:
        raise ProtocolError("request: required to start a session")
    fields = {**command.request, "session_id": session_id}
    try:
        return DebugRunRequest.model_validate(fields)
    except ValidationError as exc:
        raise ProtocolError(describe(exc, "request"), first_field(exc, "request")) from None


def describe(exc: ValidationError, what: str) -> str:
    """``what.field: problem; ...`` without the offending input values."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in (what, *error["loc"]))
        problems.append(f"{where}: {error['msg']}")
    return "invalid " + what + " — " + "; ".join(problems)


def first_field(exc: ValidationError, what: str | None) -> str | None:
    """The dotted path of the first invalid field (``request.chat_agent.temperature``).

    Without ``what`` (a whole command), the leading command type is left out.
    """
    errors = exc.errors(include_input=False, include_url=False)
    if not errors:
        return None
    loc = [str(part) for part in errors[0]["loc"]]
    parts = [what, *loc] if what is not None else loc[1:]
    return ".".join(parts) or None


def error_frame(message: str, field: str | None = None) -> dict[str, Any]:
    """``{"type": "error", "message", "field"?}``; ``field`` names what to fix."""
    frame: dict[str, Any] = {"type": "error", "message": message}
    if field is not None:
        frame["field"] = field
    return frame
