"""Translates openai/httpx exceptions into ``ProviderError``s, once, at the boundary.

Secrets (the API key, credential headers, credentials in the base URL) are replaced by
``***`` in every message this module builds and in the messages of the chained library
exceptions, so neither ``str(error)`` nor a printed traceback can show them, even when a
proxy echoes the key back in its error body, in any encoding (see ``SecretMask``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import orjson

from agent_lab.domain.errors import (
    ProviderError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTimeout,
)
from agent_lab.infrastructure.openai_compat.html_text import html_summary, looks_like_html
from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask
from agent_lab.infrastructure.openai_compat.unreachable import unreachable

_NO_SECRETS = SecretMask(())

_MAX_MESSAGE = 2000
_BROKEN_OFF: dict[type[Exception], str] = {
    httpx.ReadError: "the connection was reset or closed mid-answer",
    httpx.RemoteProtocolError: "the connection was closed mid-answer",
}
"""What an httpx error without a message of its own means, read mid-answer."""
_LIBRARY_ERRORS = (openai.OpenAIError, httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)


@contextmanager
def map_provider_errors(
    url: str, *, mask: SecretMask = _NO_SECRETS, elapsed: Callable[[], float] | None = None
) -> Iterator[None]:
    """Re-raises library exceptions from the block as the narrowest ``ProviderError``.

    Args:
        url: The endpoint (credentials already redacted), named in connection and
            timeout errors.
        mask: Masks the secrets that must never appear in an error message.
        elapsed: Seconds the call has run so far, named in timeout errors.

    Raises:
        ProviderHTTPError: An HTTP error status, with the provider's own message.
        ProviderTimeout: No answer, or a stalled stream, within ``timeout``.
        ProviderConnectionError: The endpoint could not be reached (before any answer).
        ProviderProtocolError: The connection was reset or closed once the answer had
            begun (the stream broke off).
        ProviderError: Any other failure inside the SDK.
    """
    try:
        yield
    except _LIBRARY_ERRORS as exc:
        _scrub_chain(exc, mask)
        raise _translate(exc, url, mask, elapsed) from exc


def _translate(
    exc: Exception, url: str, mask: SecretMask, elapsed: Callable[[], float] | None
) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        return ProviderHTTPError(exc.status_code, mask.text(provider_message(exc.response, mask)))
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        after = f" after {elapsed():.1f} s" if elapsed is not None else ""
        return ProviderTimeout(f"the provider at {url} timed out{after}")
    if isinstance(exc, openai.APIConnectionError):
        return unreachable(url, exc, mask.text(_account(exc.__cause__ or exc)))
    if isinstance(exc, httpx.HTTPError):
        # The SDK turns what fails before the answer into ``APIConnectionError``; an
        # httpx error of its own comes from reading the body: the answer had begun.
        reason = mask.text(str(exc)) or _BROKEN_OFF.get(type(exc), "the connection failed")
        return ProviderProtocolError(f"the provider at {url} broke off the stream: {reason}")
    return ProviderError(f"the request to {url} failed: {mask.text(str(exc))}")


def _account(exc: BaseException) -> str:
    """What the libraries said of a failed connection, innermost cause last."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        text = str(current)
        if text and text not in parts:
            parts.append(text)
        current = current.__cause__ or current.__context__
    return " <- ".join(parts) or type(exc).__name__


def provider_message(response: httpx.Response, mask: SecretMask = _NO_SECRETS) -> str:
    """The provider's own error message from an error response (read beforehand).

    Understands ``{"error": {"message"}}``, ``{"error": "..."}``, ``{"message"}`` and
    ``{"detail"}`` bodies; an HTML page (a proxy's ``502 Bad Gateway``) gives its title
    or first text, cut short (``html_text``); anything else is returned as text, cut to
    2000 characters. ``mask`` is applied before anything is cut, so that no cut can
    leave part of a secret that the mask would no longer recognise.
    """
    try:
        text = mask.text(response.text.strip())
    except httpx.ResponseNotRead:
        text = ""
    message = text
    if looks_like_html(text, response.headers.get("content-type", "")):
        summary = html_summary(text)
        message = f"{summary} (an HTML page)" if summary else "an HTML page with no text"
    elif text[:1] in ("{", "["):
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


def _scrub_chain(exc: BaseException, mask: SecretMask) -> None:
    """Masks secrets in the messages of ``exc`` and of every exception chained to it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and mask:
        seen.add(id(current))
        current.args = tuple(
            mask.text(arg) if isinstance(arg, str) else arg for arg in current.args
        )
        if isinstance(current, openai.APIError):
            current.message = mask.text(current.message)
            current.body = mask.value(current.body)
        current = current.__cause__ or current.__context__
