"""The one exception tree of Agent Lab.

Branches are named for who is at fault::

    AgentLabError
    ├── UsageError                  the caller made a mistake
    │   └── ConfigError             bad configuration (file, flag or environment)
    ├── ProviderError               the model endpoint failed
    │   ├── ProviderHTTPError       an HTTP error status (status, provider message)
    │   ├── ProviderTimeout         no answer in time
    │   ├── ProviderConnectionError endpoint unreachable
    │   └── ProviderProtocolError   a malformed or truncated stream, or an error mid-stream
    ├── ModelBehaviorError          the model broke the tool protocol (e.g. duplicate call ids)
    ├── ToolError
    │   ├── ToolNotFound
    │   └── ToolFailed
    ├── RunError
    │   └── RunCancelled
    └── StoreError                  the session store failed
        ├── SessionNotFound
        ├── SessionBusy             another live runtime drives the session
        ├── StoreFormatError        the file is not a store, or has a newer schema
        └── PersistenceFailed       a write failed; ``reason`` classifies it

Errors build their own messages; a raise site passes the facts.
"""

from __future__ import annotations

from typing import Literal

PersistenceFailure = Literal[
    "locked",
    "disk_full",
    "read_only",
    "corrupt",
    "taken_over",
    "file_replaced",
    "connection_lost",
    "unknown",
]


class AgentLabError(Exception):
    """Root of every error Agent Lab raises on purpose."""


class UsageError(AgentLabError):
    """The caller asked for something that cannot work."""


class ConfigError(UsageError):
    """A configuration value is missing or invalid."""


class ProviderError(AgentLabError):
    """The model endpoint failed."""


class ProviderHTTPError(ProviderError):
    """The endpoint answered with an HTTP error status."""

    def __init__(self, status: int, provider_message: str) -> None:
        self.status = status
        self.provider_message = provider_message
        super().__init__(f"provider returned HTTP {status}: {provider_message}")


class ProviderTimeout(ProviderError):
    """The endpoint did not answer in time."""


class ProviderConnectionError(ProviderError):
    """The endpoint could not be reached."""


class ProviderProtocolError(ProviderError):
    """The stream was malformed, truncated, or carried an error object."""


class ModelBehaviorError(AgentLabError):
    """The model broke the tool protocol."""


class ToolError(AgentLabError):
    """A tool could not be run."""


class ToolNotFound(ToolError):
    """No tool of that name is registered."""


class ToolFailed(ToolError):
    """A tool handler raised."""


class RunError(AgentLabError):
    """A run could not complete."""


class RunCancelled(RunError):
    """A run was cancelled before it completed."""


class StoreError(AgentLabError):
    """The session store failed."""


class SessionNotFound(StoreError, KeyError):
    """No session has that id."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"unknown session id: {session_id!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class SessionBusy(StoreError):
    """Another live runtime holds the session's writer claim."""

    def __init__(self, session_id: str, holder: str) -> None:
        self.session_id = session_id
        self.holder = holder
        super().__init__(
            f"session {session_id!r} is being driven by another runtime ({holder}); "
            "close it first or wait for it to finish"
        )


class StoreFormatError(StoreError):
    """The store file is not a database, or was written by a newer Agent Lab."""


_REASON_WORDING: dict[PersistenceFailure, str] = {
    "locked": "the session storage is busy (locked by another writer)",
    "disk_full": "the disk holding the session storage is full",
    "read_only": "the session storage is read-only",
    "corrupt": "the session storage file is malformed",
    "taken_over": "the session was taken over by another runtime; this one lost its claim",
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
        """The machine-readable reason carried by ``error`` outputs."""
        return f"session_persistence_failed:{self.reason}"
