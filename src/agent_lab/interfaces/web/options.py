"""Tunables of the web lab server, with defaults that suit one local user."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass(frozen=True)
class WebOptions:
    """How the web lab buffers, replays and guards its sessions.

    Attributes:
        send_buffer: Frames queued per connection before a slow client is dropped
            (closed with code 1008; it can reconnect and resume from its offset).
        replay_limit: Frames kept per live session for reconnecting clients; older
            ones are served from the store (history) instead.
        idle_seconds: A live session with no client and no turn running is closed
            after this long (``None`` keeps it until the server stops).
        allowed_hosts: Accepted ``Host`` header names; ``None`` means loopback names
            only without a token (DNS-rebinding protection) and any host with one.
        allowed_endpoints: Provider base URLs a client may name in ``connection``
            (besides the server's own); ``None`` allows any (for a loopback lab).
        error_chars: Cut provider error messages sent to clients to this length
            (``None``: as the runtime reports them, up to 2000 characters).
        queue_limit: User turns that may wait behind the running one, per session.
        rate_burst: Costly commands (``start``, ``user``) a client may send at once.
        rate_per_second: How fast that allowance refills.
    """

    send_buffer: int = 1024
    replay_limit: int = 5000
    idle_seconds: float | None = 300.0
    allowed_hosts: tuple[str, ...] | None = None
    allowed_endpoints: tuple[str, ...] | None = None
    error_chars: int | None = None
    queue_limit: int = 8
    rate_burst: int = 120
    rate_per_second: float = 30.0

    def hosts(self, token: str | None) -> tuple[str, ...] | None:
        """The ``Host`` names to accept, or ``None`` for any."""
        if self.allowed_hosts is not None:
            return self.allowed_hosts
        return None if token else LOOPBACK_HOSTS

    def endpoint_allowed(self, base_url: str, own: str | None) -> bool:
        """Whether a client may point its session's provider at ``base_url``."""
        if self.allowed_endpoints is None:
            return True
        allowed = {normal_url(url) for url in (*self.allowed_endpoints, own or "") if url}
        return normal_url(base_url) in allowed


def normal_url(url: str) -> str:
    """``HTTPS://Host/v1/`` → ``https://host/v1``: how endpoints are compared."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"
