"""What the web lab's handlers share, stored once on ``app.state.web``."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import ConfigError
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.web.guards import RateLimit, Watchers
from agent_lab.interfaces.web.hub import SessionHub
from agent_lab.interfaces.web.masking import Masker
from agent_lab.interfaces.web.options import WebOptions


@dataclass(frozen=True)
class WebState:
    """The lab, its live-session hub, the server options and the access token, plus the
    masker of secrets, the per-client rate limit and who watches which session."""

    lab: Lab
    hub: SessionHub
    options: WebOptions
    token: str | None
    masker: Masker
    rate: RateLimit
    watchers: Watchers = field(default_factory=Watchers)
    session_keys: dict[str, str] = field(default_factory=dict)
    """Keys typed into the page, per live session, so every client of it masks them."""

    def masker_for(self, session_id: str) -> Masker:
        """The masker of the frames of ``session_id``."""
        return self.masker.with_secret(self.session_keys.get(session_id))

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
