"""Tunables of the web lab server, with defaults that suit one local user."""

from __future__ import annotations

from dataclasses import dataclass

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
    """

    send_buffer: int = 1024
    replay_limit: int = 5000
    idle_seconds: float | None = 300.0
    allowed_hosts: tuple[str, ...] | None = None

    def hosts(self, token: str | None) -> tuple[str, ...] | None:
        """The ``Host`` names to accept, or ``None`` for any."""
        if self.allowed_hosts is not None:
            return self.allowed_hosts
        return None if token else LOOPBACK_HOSTS
