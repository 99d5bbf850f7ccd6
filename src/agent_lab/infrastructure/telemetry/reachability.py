"""An unreachable trace backend fails an export at once, and is reported once.

The OTLP exporters retry a connection that could not be made with backoff (about 7 s
per batch at the default 10 s timeout, so a short run without a collector took 25 s)
and log every attempt. ``FailFastSession`` is the ``requests`` session both exporters
of a sink use: a connection that could not be made (refused, unknown host, connect
timeout) marks that backend unreachable, and for the next ``RETRY_AFTER_S`` seconds every
export to it fails at once, without touching the network. It raises ``BackendUnreachable``,
which the exporters do not retry. ``Reachability.failure`` says, in one line, why the
last export failed; the exporters' own log lines are kept off stderr (``quiet_logs``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from agent_lab.infrastructure.openai_compat.secret_mask import redact_url

RETRY_AFTER_S: Final = 30.0
"""How long a backend found unreachable is not tried again."""

_EXPORTER_LOGGERS: Final = ("opentelemetry.exporter.otlp",)
_CREDENTIAL_PROVIDER: Final = "OTEL_PYTHON_EXPORTER_OTLP_HTTP"
"""Prefix of the variables that give the exporters a session of their own."""


class BackendUnreachable(Exception):  # noqa: N818 - reads as the state it reports
    """No connection could be made to the trace backend (the exporters do not retry it)."""


class Reachability:
    """What the exporters of one sink learnt about their backends (thread-safe).

    Kept per origin (scheme, host and port): a metrics endpoint elsewhere that is down
    does not hold the spans back.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._down: dict[str, tuple[float, str]] = {}
        """Origin -> until when it is not tried again, and why."""
        self.failure: str | None = None
        """Why the last export failed, one line; ``None`` after an accepted one."""

    def check(self, url: str) -> None:
        """Raises: BackendUnreachable while ``url``'s origin counts as unreachable."""
        with self._lock:
            until, failure = self._down.get(_origin(url), (0.0, ""))
            if self._clock() < until:
                self.failure = failure
                raise BackendUnreachable(failure)

    def unreachable(self, url: str, error: Exception) -> BackendUnreachable:
        """Notes a connection that could not be made; returns the error to raise."""
        failure = (
            f"the trace backend at {redact_url(url)} is unreachable ({_reason(error)}); "
            "spans and metrics are not sent (check OTEL_EXPORTER_OTLP_ENDPOINT)"
        )
        with self._lock:
            self.failure = failure
            self._down[_origin(url)] = (self._clock() + RETRY_AFTER_S, failure)
        return BackendUnreachable(failure)

    def answered(self, url: str, status: int, reason: str) -> None:
        """Notes the backend's answer: a refusal is the failure, success clears it."""
        with self._lock:
            self._down.pop(_origin(url), None)
            if status < 400:
                self.failure = None
            else:
                shown = f"HTTP {status} {reason}".strip()
                self.failure = f"the trace backend at {redact_url(url)} answered {shown}"


class FailFastSession(requests.Session):
    """The exporters' HTTP session: gives up on an unreachable backend at once."""

    def __init__(self, reachability: Reachability) -> None:
        super().__init__()
        self.reachability = reachability

    def request(
        self, method: str, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        target = url.decode() if isinstance(url, bytes) else url
        self.reachability.check(target)
        try:
            response = super().request(method, url, *args, **kwargs)
        except requests.exceptions.ConnectionError as exc:
            if _never_connected(exc):
                raise self.reachability.unreachable(target, exc) from exc
            raise
        self.reachability.answered(target, response.status_code, response.reason or "")
        return response


def session_for(reachability: Reachability) -> FailFastSession | None:
    """The session to give the exporters, or ``None`` when a credential provider set
    through ``OTEL_PYTHON_EXPORTER_OTLP_HTTP_*CREDENTIAL_PROVIDER`` brings its own."""
    for name, value in os.environ.items():
        if name.startswith(_CREDENTIAL_PROVIDER) and name.endswith("PROVIDER") and value.strip():
            return None
    return FailFastSession(reachability)


def quiet_logs() -> None:
    """Keeps the exporters' own lines (each retry, each failed batch) off stderr: the
    sink reports a failure itself, once. A level the user set on them wins."""
    for name in _EXPORTER_LOGGERS:
        log = logging.getLogger(name)
        if log.level == logging.NOTSET:
            log.setLevel(logging.CRITICAL)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}"


def _never_connected(error: requests.exceptions.ConnectionError) -> bool:
    """Refused, unknown host or connect timeout, not a pooled connection that broke."""
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return True
    cause = error.args[0] if error.args else None
    return isinstance(getattr(cause, "reason", cause), NewConnectionError)


def _reason(error: BaseException) -> str:
    """The operating system's words (``connection refused``), else the error's type."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
        current = current.__cause__ or current.__context__
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return "connect timeout"
    return "no connection"
