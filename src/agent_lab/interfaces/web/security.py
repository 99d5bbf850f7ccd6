"""Who may talk to the web lab: bearer token, ``Host`` and WebSocket ``Origin`` checks.

* With a token, every ``/api`` call needs ``Authorization: Bearer <token>`` (401
  otherwise) and the WebSocket needs it in its ``Sec-WebSocket-Protocol`` header,
  as ``agent-lab.token.<base64url of the token>`` next to ``agent-lab`` (closed with
  4401 otherwise). A ``?token=`` query is refused like a missing token: it would land
  in access logs. An empty token never matches.
* ``Host`` must be a loopback name unless a token is set or hosts are configured, so
  a DNS-rebinding page cannot reach a tokenless lab through the victim's browser.
* A browser WebSocket must come from the page's own origin (closed with 4403
  otherwise): WebSockets are not covered by the same-origin policy.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, WebSocket
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
SUBPROTOCOL = "agent-lab"
"""The WebSocket subprotocol the page asks for; the server selects it when offered."""
_TOKEN_PROTOCOL = "agent-lab.token."
MIN_TOKEN_CHARS = 16
"""Shortest token accepted for a lab reachable from other machines."""


def token_matches(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison; no token configured means everyone matches."""
    if expected is None:
        return True
    if not expected or not given:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class RequireToken:
    """FastAPI dependency: 401 unless the request carries the bearer token."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    async def __call__(self, request: Request) -> None:
        given = bearer_token(request.headers.get("authorization"))
        if not token_matches(self._token, given):
            raise HTTPException(
                status_code=401,
                detail="missing or wrong bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )


def socket_denial(websocket: WebSocket, token: str | None) -> int | None:
    """The close code to refuse ``websocket`` with, or ``None`` to accept it."""
    given = protocol_token(websocket.headers)
    if not token_matches(token, given):
        return CLOSE_UNAUTHORIZED
    if not same_origin(websocket.headers):
        return CLOSE_FORBIDDEN_ORIGIN
    return None


def offered_protocols(headers: Headers) -> list[str]:
    """The subprotocols a WebSocket client offered."""
    header = headers.get("sec-websocket-protocol", "")
    return [part.strip() for part in header.split(",") if part.strip()]


def protocol_token(headers: Headers) -> str | None:
    """The token carried as ``agent-lab.token.<base64url>`` subprotocol, if any."""
    for protocol in offered_protocols(headers):
        if protocol.startswith(_TOKEN_PROTOCOL):
            encoded = protocol[len(_TOKEN_PROTOCOL) :]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
    return None


def chosen_protocol(headers: Headers) -> str | None:
    """``agent-lab`` when the client offered it (browsers require an answer then)."""
    return SUBPROTOCOL if SUBPROTOCOL in offered_protocols(headers) else None


def check_token(token: str | None) -> None:
    """Raises ``ValueError`` for an empty token (it would protect nothing)."""
    if token is not None and not token.strip():
        raise ValueError("the access token must not be empty")


def same_origin(headers: Headers) -> bool:
    """No ``Origin`` (not a browser) or one whose host:port is the ``Host`` header."""
    origin = headers.get("origin")
    if origin is None:
        return True
    host = headers.get("host", "")
    return urlsplit(origin).netloc.lower() == host.lower()


def host_name(host_header: str) -> str:
    """``127.0.0.1:8000`` → ``127.0.0.1``; ``[::1]:80`` → ``[::1]``."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class HostGuard:
    """ASGI middleware refusing requests whose ``Host`` is not an allowed name."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = {name.lower() for name in allowed}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = host_name(Headers(scope=scope).get("host", "")).lower()
        if host in self.allowed:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": CLOSE_FORBIDDEN_ORIGIN})
        else:
            response = JSONResponse({"detail": "host not allowed"}, status_code=400)
            await response(scope, receive, send)


class NoSniff:
    """ASGI middleware adding ``X-Content-Type-Options: nosniff`` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
            await send(message)

        await self.app(scope, receive, send_with_header)
