"""What a ``start`` command must pass before anything runs: its request (the model's
own validation, the size limits, what the runtime checks before it writes anything)
and its endpoint. The socket runs these checks when a session starts, and the page
runs the very same ones (``POST /api/sessions/{id}/check``) before it ends a live
runtime to restart it with changed settings, so a refused change ends nothing.
"""

from __future__ import annotations

from typing import Any

import httpx

from agent_lab.application.contracts import DebugRunRequest, check_runnable
from agent_lab.domain.errors import InvalidRequest
from agent_lab.interfaces.web.limits import LimitExceeded, check_message_size, check_request
from agent_lab.interfaces.web.protocol import (
    ConnectionOverride,
    ProtocolError,
    StartCommand,
    error_frame,
    parse_command,
    request_error,
    run_request,
)
from agent_lab.interfaces.web.state import WebState

Refusal = InvalidRequest | ProtocolError | LimitExceeded
"""A client message refused before anything ran; its text is safe to send back."""
REFUSALS = (InvalidRequest, ProtocolError, LimitExceeded)
"""``Refusal`` for ``except``."""


def checked_start(
    state: WebState, command: StartCommand, session_id: str
) -> DebugRunRequest | None:
    """The command's request (``None`` when it has none: an attach), checked.

    Raises:
        ProtocolError: the request is not a valid ``DebugRunRequest`` or the endpoint
            is not one this server allows.
        LimitExceeded: a field is over its size limit.
        InvalidRequest: the runtime would refuse the request (an unknown tool…).
    """
    request = run_request(command, session_id) if command.request else None
    if request is not None:
        check_request(request)
        check_runnable(request, state.lab.registry.names())  # nothing stored yet
        check_connection(state, command.connection)
    return request


def check_start_text(state: WebState, text: str, session_id: str) -> None:
    """Check a ``start`` command as the socket would take it, without running it.

    Raises:
        ProtocolError: not a ``start`` command, or invalid (see ``checked_start``).
        LimitExceeded: the message or a field is over its size limit.
        InvalidRequest: the runtime would refuse the request.
    """
    check_message_size(text)
    command = parse_command(text)
    if not isinstance(command, StartCommand):
        raise ProtocolError("type: only a start message can be checked", "type")
    checked_start(state, command, session_id)


def check_connection(state: WebState, connection: ConnectionOverride | None) -> None:
    """Raises ``ProtocolError`` for an endpoint typed in the page that is not an
    http(s) URL or not one this server allows."""
    base_url = (connection.base_url or "").strip() if connection is not None else ""
    if not base_url:
        return
    field = "connection.base_url"
    if not _is_http_url(base_url):
        raise ProtocolError(f"{field}: must be an http(s) URL with a host", field)
    if not state.options.endpoint_allowed(base_url, state.lab.base_url):
        raise ProtocolError(
            f"{field}: not an endpoint this server allows (see `agent-lab serve --allow-endpoint`)",
            field,
        )


def refusal_frame(exc: Refusal) -> dict[str, Any]:
    """The ``error`` frame of a refused message, naming the field to fix."""
    if isinstance(exc, InvalidRequest):
        error = request_error(exc)
        return error_frame(str(error), error.field)
    return error_frame(str(exc), exc.field)


def _is_http_url(base_url: str) -> bool:
    """An ``http(s)`` URL with a host, as the provider client accepts."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return False
    return url.scheme in ("http", "https") and bool(url.host)
