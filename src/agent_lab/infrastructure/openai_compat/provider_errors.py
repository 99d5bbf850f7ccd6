"""Translates openai/httpx exceptions into ``ProviderError``s, once, at the boundary.

Secrets (the API key, credential headers) are replaced by ``***`` in every message this
module builds and in the messages of the chained library exceptions, so neither
``str(error)`` nor a printed traceback can show them, even when a proxy echoes the key
back in its error body.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import orjson

from agent_lab.domain.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTimeout,
)

_MAX_MESSAGE = 2000
_MASK = "***"
_LIBRARY_ERRORS = (openai.OpenAIError, httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)


@contextmanager
def map_provider_errors(
    url: str, *, secrets: Sequence[str] = (), timeout: float | None = None
) -> Iterator[None]:
    """Re-raises library exceptions from the block as the narrowest ``ProviderError``.

    Args:
        url: The endpoint, named in connection and timeout errors.
        secrets: Strings that must never appear in an error message.
        timeout: The configured timeout in seconds, named in timeout errors.

    Raises:
        ProviderHTTPError: An HTTP error status, with the provider's own message.
        ProviderTimeout: No answer, or a stalled stream, within ``timeout``.
        ProviderConnectionError: The endpoint could not be reached or dropped the connection.
        ProviderProtocolError: The server closed the stream mid-message.
        ProviderError: Any other failure inside the SDK.
    """
    try:
        yield
    except _LIBRARY_ERRORS as exc:
        _scrub_chain(exc, secrets)
        raise _translate(exc, url, secrets, timeout) from exc


def scrub(text: str, secrets: Sequence[str]) -> str:
    """Returns ``text`` with every secret replaced by ``***``."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, _MASK)
    return text


def _translate(
    exc: Exception, url: str, secrets: Sequence[str], timeout: float | None
) -> ProviderError:
    after = f" after {timeout:g} s" if timeout is not None else ""
    if isinstance(exc, openai.APIStatusError):
        return ProviderHTTPError(exc.status_code, scrub(provider_message(exc.response), secrets))
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return ProviderTimeout(f"the provider at {url} timed out{after}")
    if isinstance(exc, openai.APIConnectionError):
        reason = scrub(str(exc.__cause__ or exc), secrets)
        return ProviderConnectionError(f"cannot reach the provider at {url}: {reason}")
    if isinstance(exc, httpx.RemoteProtocolError):
        reason = scrub(str(exc), secrets)
        return ProviderProtocolError(f"the provider at {url} broke off the stream: {reason}")
    if isinstance(exc, httpx.HTTPError):
        reason = scrub(str(exc), secrets)
        return ProviderConnectionError(f"the connection to {url} failed: {reason}")
    return ProviderError(f"the request to {url} failed: {scrub(str(exc), secrets)}")


def provider_message(response: httpx.Response) -> str:
    """The provider's own error message from an error response (read beforehand).

    Understands ``{"error": {"message"}}``, ``{"error": "..."}``, ``{"message"}`` and
    ``{"detail"}`` bodies; anything else is returned as text, cut to 2000 characters.
    """
    try:
        text = response.text.strip()
    except httpx.ResponseNotRead:
        text = ""
    message = text
    if text[:1] in ("{", "["):
        try:
            message = _message_from_body(orjson.loads(text))
        except orjson.JSONDecodeError:
            message = text
    message = message or response.reason_phrase or f"HTTP {response.status_code}"
    return message if len(message) <= _MAX_MESSAGE else message[:_MAX_MESSAGE] + "…"


def _message_from_body(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for value in (error, body.get("message"), body.get("detail")):
            if isinstance(value, str) and value:
                return value
        if body.get("detail") is not None:
            return orjson.dumps(body["detail"]).decode()
    return orjson.dumps(body).decode()


def _scrub_chain(exc: BaseException, secrets: Sequence[str]) -> None:
    """Masks secrets in the messages of ``exc`` and of every exception chained to it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and secrets:
        seen.add(id(current))
        current.args = tuple(
            scrub(arg, secrets) if isinstance(arg, str) else arg for arg in current.args
        )
        if isinstance(current, openai.APIError):
            current.message = scrub(current.message, secrets)
            current.body = _scrubbed_body(current.body, secrets)
        current = current.__cause__ or current.__context__


def _scrubbed_body(body: object, secrets: Sequence[str]) -> object:
    if body is None:
        return None
    try:
        text = orjson.dumps(body).decode()
        cleaned = scrub(text, secrets)
        return body if cleaned == text else orjson.loads(cleaned)
    except (TypeError, orjson.JSONDecodeError):
        return None
