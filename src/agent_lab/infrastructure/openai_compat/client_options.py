"""Checks of a chat client's options before any request, and the secrets they carry."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.openai_compat.secret_mask import redact_url, url_secrets

SECRET_HEADER_WORDS = (
    "auth",
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "signature",
    "cookie",
)
"""A header whose name contains one of these (in any case) carries a secret:
``Authorization``, ``Proxy-Authorization``, ``api-key``, ``X-Goog-Api-Key``,
``Ocp-Apim-Subscription-Key``, ``X-Auth-Token``, ``Cookie`` ... Its value is masked
wherever text could show it; other headers (a title, a user agent) are not."""


def is_secret_header(name: str) -> bool:
    """Whether the header ``name`` carries a credential (see ``SECRET_HEADER_WORDS``)."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_HEADER_WORDS)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A base URL taken apart into what the SDK sends it as.

    The SDK appends the endpoint's path to its base URL as a string, so a query in the
    base URL would swallow ``/chat/completions``; and the HTTP stack turns credentials
    in it into an ``Authorization`` header of its own. Both leave the URL here.
    """

    base_url: str
    """The URL without credentials, query or fragment."""
    query: dict[str, str]
    """The base URL's query, sent with every request."""
    headers: dict[str, str]
    """The caller's headers, plus ``Authorization: Basic`` for credentials in the URL."""
    secrets: tuple[str, ...]
    """Every form of every credential the requests carry, longest first."""


def endpoint_of(base_url: str, api_key: str | None, headers: Mapping[str, str]) -> Endpoint:
    """Checks ``base_url``, the key and the headers, and takes the URL apart.

    Raises:
        ConfigError: ``base_url`` is not an http(s) URL with a host or repeats a query
            parameter; it carries credentials (``user:pass@``) while an API key or an
            ``Authorization`` header is given too (only one can be the request's
            ``Authorization``); a key or header value cannot be sent in a header. No
            message shows a secret.
    """
    url = _parse(base_url)
    check_header_values(api_key, headers)
    sent = dict(headers)
    if url.username or url.password:
        if api_key or any(name.lower() == "authorization" for name in headers):
            given = "an API key" if api_key else "an Authorization header"
            raise ConfigError(
                f"base_url {redact_url(base_url)!r} carries credentials (user:pass@) and"
                f" {given} is given too: both would be the request's Authorization"
                " header; keep one of them"
            )
        sent["Authorization"] = basic_authorization(url.username, url.password)
    query: dict[str, str] = {}
    for name, value in url.params.multi_items():
        if name in query:
            raise ConfigError(
                f"base_url {redact_url(base_url)!r} repeats the query parameter {name!r}:"
                " give it once"
            )
        query[name] = value
    bare = url.copy_with(userinfo=b"", query=None, fragment=None)
    found = {*header_secrets(api_key, sent), *url_secrets(base_url)}
    return Endpoint(str(bare), query, sent, tuple(sorted(found, key=len, reverse=True)))


def _parse(base_url: str) -> httpx.URL:
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"invalid base_url {redact_url(base_url)!r}: {exc}") from None
    if url.scheme not in {"http", "https"} or not url.host:
        shown = redact_url(base_url)
        raise ConfigError(f"base_url must be an http:// or https:// URL, got {shown!r}")
    return url


def check_base_url(base_url: str) -> None:
    """Raises: ConfigError unless ``base_url`` is an http(s) URL with a host."""
    _parse(base_url)


def basic_authorization(username: str, password: str) -> str:
    """The ``Authorization`` value for a URL's ``user:pass@``, as ``httpx`` builds it."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def check_header_values(api_key: str | None, headers: Mapping[str, str]) -> None:
    """Refuse what HTTP cannot carry in a header (printable ASCII and tabs only), naming
    the character's position and code point but never the value: it may be a secret."""
    named = [("api_key", api_key or ""), *((f"header {k!r}", v) for k, v in headers.items())]
    for name, value in named:
        for position, char in enumerate(value, 1):
            if not (" " <= char <= "~" or char == "\t"):
                hint = " (a placeholder such as 'sk-…'?)" if char == "…" else ""
                raise ConfigError(
                    f"{name} cannot be sent in an HTTP header: character {position} is"
                    f" U+{ord(char):04X}, and only printable ASCII is allowed{hint}"
                )


def header_secrets(api_key: str | None, headers: Mapping[str, str]) -> tuple[str, ...]:
    """The secrets a request carries (the key, credential headers and their
    credentials, a Basic token also decoded), longest first, for masking."""
    found = [api_key] if api_key else []
    for name, value in headers.items():
        if is_secret_header(name) and value:
            found.append(value)
            scheme, _, credential = value.strip().partition(" ")
            if credential and scheme.isalnum():
                found.append(credential.strip())
                if scheme.lower() == "basic":
                    found.extend(_basic_secrets(credential.strip()))
    return tuple(sorted(set(found), key=len, reverse=True))


def _basic_secrets(token: str) -> list[str]:
    """A Basic token without its padding, and ``user:pass``, the user and the password."""
    try:
        userpass = base64.b64decode(token, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return []
    user, _, password = userpass.partition(":")
    return [token.rstrip("="), userpass, *(part for part in (user, password) if part)]


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` under ``base_url``, with the base URL's query after it (for messages)."""
    root, mark, query = base_url.partition("#")[0].partition("?")
    return f"{root.rstrip('/')}/{path}{mark}{query}"
