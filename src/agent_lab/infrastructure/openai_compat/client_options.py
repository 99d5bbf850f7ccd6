"""Checks of a chat client's options before any request, and the secrets they carry."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.openai_compat.secret_mask import redact_url

SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "proxy-authorization"})
"""Headers whose values are secrets (masked wherever text could show them)."""


def check_base_url(base_url: str) -> None:
    """Raises: ConfigError unless ``base_url`` is an http(s) URL with a host."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigError(f"invalid base_url {redact_url(base_url)!r}: {exc}") from None
    if url.scheme not in {"http", "https"} or not url.host:
        shown = redact_url(base_url)
        raise ConfigError(f"base_url must be an http:// or https:// URL, got {shown!r}")


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
    credentials), longest first, for masking."""
    found = [api_key] if api_key else []
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS and value:
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.lower() in {"bearer", "basic", "token"}:
                found.append(credential)
    return tuple(sorted(set(found), key=len, reverse=True))
