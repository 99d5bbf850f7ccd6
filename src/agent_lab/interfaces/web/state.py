"""What the web lab's handlers share, stored once on ``app.state.web``."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import ConfigError
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.web.hub import SessionHub
from agent_lab.interfaces.web.options import WebOptions


@dataclass(frozen=True)
class WebState:
    """The lab, its live-session hub, the server options and the access token."""

    lab: Lab
    hub: SessionHub
    options: WebOptions
    token: str | None

    def store(self) -> SessionStore:
        """The lab's store.

        Raises:
            ConfigError: the lab is not open.
        """
        if self.lab.store is None:
            raise ConfigError("the lab is not open; use `async with Lab(...)`")
        return self.lab.store


def web_state(connection: HTTPConnection) -> WebState:
    """The shared state of the app serving ``connection``."""
    state: WebState = connection.app.state.web
    return state
