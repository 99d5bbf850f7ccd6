"""The one exception tree of Agent Lab.

Branches are named for who is at fault::

    AgentLabError
    ├── UsageError                  the caller made a mistake
    │   ├── ConfigError             bad configuration (file, flag or environment)
    │   └── InvalidRequest          (also ValueError) a request field the runtime cannot use
    │       └── UnknownTools        ``enabled_tools`` names tools the registry does not have
    ├── ProviderError               the model endpoint failed
    │   ├── ProviderHTTPError       an HTTP error status (status, provider message)
    │   ├── ProviderTimeout         no answer in time
    │   │   └── ProviderDeadlineExceeded  the idle or total deadline of a call passed
    │   ├── ProviderConnectionError endpoint unreachable
    │   └── ProviderProtocolError   a malformed or truncated stream, or an error mid-stream
    ├── ModelBehaviorError          the model broke the tool protocol (e.g. duplicate call ids)
    ├── InvalidTranscript           (also ValueError) a transcript a strict provider rejects
    ├── ToolError
    │   └── ToolFailed              a tool handler or argument resolver raised
    ├── RunCancelled                the turn was cancelled before it completed
    ├── TurnLimitExceeded           a turn hit the hard cap on rounds or wall time
    ├── InternalError               an unexpected exception (a bug) ended the turn
    └── StoreError                  the session store failed
        ├── SessionNotFound
        ├── SessionBusy             another live runtime drives the session
        ├── StoreFormatError        the file is not a store, or has a newer schema
        ├── InvalidStoredRow        a stored message cannot be restored (names the row)
        └── PersistenceFailed       a write failed; ``reason`` classifies it

Errors build their own messages; a raise site passes the facts. Every error also says
what it means to whoever reports it: ``failure_reason`` is the machine-readable code
that ``error`` outputs carry (e.g. ``provider_error:http_503``), and ``exit_class`` tells
a command-line front end which kind of exit it is (``usage``: fix the configuration or
the request, retrying as is will not help; ``run_failed``: the run failed;
``interrupted``: it was cancelled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Literal

PersistenceFailure = Literal[
    "locked",
    "disk_full",
    "read_only",
    "corrupt",
    "taken_over",
    "deleted",
    "file_replaced",
    "connection_lost",
    "unknown",
]
ExitClass = Literal["usage", "run_failed", "interrupted"]

_CALLER_HTTP_STATUSES = frozenset({401, 403, 404})
"""HTTP statuses that mean the endpoint, model or key is configured wrong."""


class AgentLabError(Exception):
    """Root of every error Agent Lab raises on purpose."""

    code: ClassVar[str] = "run_error"
    """The ``failure_reason`` of this class (subclasses with facts refine it)."""
    exit_kind: ClassVar[ExitClass] = "run_failed"

    @property
    def failure_reason(self) -> str:
        """The machine-readable reason carried by ``error`` outputs."""
        return self.code

    @property
    def exit_class(self) -> ExitClass:
        """Which kind of exit a command-line front end makes for this error."""
        return self.exit_kind


class UsageError(AgentLabError):
    """The caller asked for something that cannot work."""

    code = "usage_error"
    exit_kind = "usage"


class ConfigError(UsageError):
    """A configuration value is missing or invalid."""

    code = "config_error"


class InvalidRequest(UsageError, ValueError):
    """A field of a run request that the runtime cannot use; nothing was started."""

    code = "invalid_request"

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"invalid request: {field}: {problem}")


class UnknownTools(InvalidRequest):
    """``event_agent.enabled_tools`` names tools the runtime's registry does not have."""

    def __init__(
        self,
        unknown: Sequence[str],
        close_matches: Mapping[str, Sequence[str]],
        known: Sequence[str],
    ) -> None:
        self.unknown = tuple(unknown)
        self.close_matches = {name: tuple(close_matches.get(name, ())) for name in unknown}
        named = ", ".join(_with_hint(name, self.close_matches[name]) for name in self.unknown)
        listed = ", ".join(known) if known else "none"
        super().__init__("event_agent.enabled_tools", f"unknown tool(s) {named}; known: {listed}")


def _with_hint(name: str, matches: Sequence[str]) -> str:
    if not matches:
        return repr(name)
    return f"{name!r} (did you mean {' or '.join(repr(match) for match in matches)}?)"


class ProviderError(AgentLabError):
    """The model endpoint failed."""

    code = "provider_error:protocol"


class ProviderHTTPError(ProviderError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status: int, provider_message: str) -> None:
        self.status = status
        self.provider_message = provider_message
        super().__init__(f"provider returned HTTP {status}: {provider_message}")

    @property
    def failure_reason(self) -> str:
        return f"provider_error:http_{self.status}"

    @property
    def exit_class(self) -> ExitClass:
        return "usage" if self.status in _CALLER_HTTP_STATUSES else "run_failed"


class ProviderTimeout(ProviderError):
    """The endpoint did not answer in time."""

    code = "provider_error:timeout"


DeadlineKind = Literal["idle", "total"]
"""``idle``: no content for too long (keep-alives do not count); ``total``: the whole call."""


class ProviderDeadlineExceeded(ProviderTimeout):
    """A deadline of one model call passed; the message names it and the real elapsed time."""

    def __init__(self, url: str, deadline: DeadlineKind, limit_s: float, elapsed_s: float) -> None:
        self.url = url
        self.deadline: DeadlineKind = deadline
        self.limit_s = limit_s
        self.elapsed_s = elapsed_s
        what = (
            f"sent no content for {limit_s:g} s (idle deadline)"
            if deadline == "idle"
            else f"did not finish within {limit_s:g} s (total deadline)"
        )
        super().__init__(
            f"the provider at {url} timed out: it {what}; "
            f"the call ran {elapsed_s:.1f} s, retries included"
        )


class ProviderConnectionError(ProviderError):
    """The endpoint could not be reached."""

    code = "provider_error:unreachable"
    exit_kind = "usage"


class ProviderProtocolError(ProviderError):
    """The stream was malformed, truncated, or carried an error object."""


class ModelBehaviorError(AgentLabError):
    """The model broke the tool protocol."""

    code = "protocol_error"


class InvalidTranscript(AgentLabError, ValueError):
    """A transcript breaks the tool protocol strict providers enforce; nothing was sent."""

    code = "invalid_transcript"


class ToolError(AgentLabError):
    """A tool could not be run."""

    code = "tool_error"


class ToolFailed(ToolError):
    """A tool handler or argument resolver raised."""

    code = "tool_failed"


class RunCancelled(AgentLabError):
    """A turn was cancelled before it completed."""

    code = "cancelled"
    exit_kind = "interrupted"

    def __init__(self, message: str = "turn cancelled") -> None:
        super().__init__(message)


class TurnLimitExceeded(AgentLabError):
    """A turn ran into the runtime's hard cap on rounds or on wall time."""

    def __init__(self, limit: Literal["rounds", "wall_time"], detail: str) -> None:
        self.limit = limit
        super().__init__(f"the turn was stopped at its {detail}")

    @property
    def failure_reason(self) -> str:
        return f"turn_limit_exceeded:{self.limit}"


class InternalError(AgentLabError):
    """An exception nobody raised on purpose (a bug in a client, tool or the runtime)."""

    code = "internal_error"


class StoreError(AgentLabError):
    """The session store failed."""

    code = "session_persistence_failed:unknown"


class SessionNotFound(StoreError, KeyError):
    """No session has that id."""

    code = "session_not_found"
    exit_kind = "usage"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"unknown session id: {session_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class SessionBusy(StoreError):
    """Another live runtime holds the session's writer claim."""

    code = "session_busy"
    exit_kind = "usage"

    def __init__(self, session_id: str, holder: str) -> None:
        self.session_id = session_id
        self.holder = holder
        super().__init__(
            f"session {session_id!r} is being driven by another runtime ({holder}); "
            "close it first or wait for it to finish"
        )


class StoreFormatError(StoreError):
    """The store file is not a database, or was written by a newer Agent Lab."""

    code = "session_persistence_failed:corrupt"
    exit_kind = "usage"


class InvalidStoredRow(StoreError):
    """A stored message is not a valid message, and no repair rule applies to it."""

    code = "stored_row_invalid"

    def __init__(self, session_id: str, seq: object, turn_index: object, problem: str) -> None:
        self.session_id = session_id
        self.seq = seq
        self.problem = problem
        super().__init__(
            f"session {session_id!r} cannot be restored: its stored message #{seq} "
            f"(turn {turn_index}) is invalid: {problem}"
        )


_REASON_WORDING: dict[PersistenceFailure, str] = {
    "locked": "the session storage is busy (locked by another writer)",
    "disk_full": "the disk holding the session storage is full",
    "read_only": "the session storage is read-only",
    "corrupt": "the session storage file is malformed",
    "taken_over": "the session was taken over by another runtime; this one lost its claim",
    "deleted": "the session was deleted while this runtime was driving it",
    "file_replaced": "the session storage file was deleted or replaced while open",
    "connection_lost": "the connection to the session database was lost",
    "unknown": "the session storage failed",
}


class PersistenceFailed(StoreError):
    """A durable write failed; ``reason`` says why in one word."""

    def __init__(self, reason: PersistenceFailure, detail: str = "") -> None:
        self.reason: PersistenceFailure = reason
        self.detail = detail
        text = _REASON_WORDING[reason]
        super().__init__(f"{text}: {detail}" if detail else text)

    @property
    def failure_reason(self) -> str:
        return f"session_persistence_failed:{self.reason}"

    @property
    def exit_class(self) -> ExitClass:
        """``deleted`` is a usage failure (as an unknown session is): the session is
        gone, so going on with it, or retrying, cannot work."""
        return "usage" if self.reason == "deleted" else self.exit_kind
