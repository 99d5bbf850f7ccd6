"""Masks credentials in every encoding a provider or proxy may echo them back in (no I/O).

A secret is found whatever mix of these encodings spells it, character by character:
plain, upper or lower case, JSON-escaped (``\\/`` for ``/``, ``\\u0073`` for ``s``, also
escaped once more as in a ``repr``) and URL-encoded (``%2F``, ``%2f``). Chunks are masked
*after* JSON decoding too, so a key hidden behind escapes in the raw bytes cannot survive
into the decoded text.

Credentials embedded in a base URL (``user:pass@``, ``api-key=``/``key=``/``token=`` query
values) are secrets as well; ``redact_url`` gives the URL to show in messages and reprs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

import orjson

MASK = "***"
_MIN_SECRET = 4
_PROBE = 8
"""Shorter values (``key=1``) are not treated as secrets: masking them would garble text."""
_QUERY_SECRETS = frozenset(
    {"api-key", "api_key", "apikey", "key", "token", "access_token", "auth", "password", "secret"}
)


def _char_pattern(char: str) -> str:
    forms = {re.escape(char)}
    for variant in {char, char.lower(), char.upper()}:
        code = ord(variant)
        if code < 0x10000:
            forms.add(rf"\\+u{code:04x}")  # IGNORECASE covers \u00AB; \\u when re-escaped
        if code < 0x80:
            forms.add(f"%{code:02x}")
    if char == "/":
        forms.add(r"\\+/")
    return "(?:" + "|".join(sorted(forms)) + ")"


def _pattern(secrets: Iterable[str]) -> str:
    spelled = ("".join(_char_pattern(char) for char in secret) for secret in secrets)
    return "|".join(spelled)


def _probe(secret: str) -> bytes:
    """Up to 8 characters of its longest run of letters and digits, in lower case.

    No encoding but ``\\uXXXX`` changes such a run, so a chunk that contains neither
    ``\\u`` nor the probe (in any case) cannot spell the secret. A short probe keeps
    the search fast; a false positive only costs a closer look.
    """
    runs = re.findall(r"[A-Za-z0-9]+", secret)
    run = max(runs, key=len) if runs else secret
    return run[:_PROBE].lower().encode()


class SecretMask:
    """Replaces known secrets by ``***`` in text, bytes and decoded JSON chunks."""

    __slots__ = ("_bytes", "_probes", "_text")

    def __init__(self, secrets: Iterable[str]) -> None:
        """Compiles one pattern for all secrets (longest first); empty ones are ignored."""
        unique = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self._probes: tuple[bytes, ...] = ()
        if unique:
            pattern = _pattern(unique)
            self._text = re.compile(pattern, re.IGNORECASE)
            self._bytes = re.compile(pattern.encode(), re.IGNORECASE)
            self._probes = tuple({_probe(s) for s in unique})

    def __bool__(self) -> bool:
        return self._text is not None

    def text(self, value: str) -> str:
        """``value`` with every spelling of every secret replaced by ``***``."""
        if self._text is None or not value:
            return value
        masked = self._text.sub(MASK, value)
        return value if masked == value else masked

    def data(self, value: bytes) -> bytes:
        """The same for raw bytes (a body that is not JSON)."""
        if self._bytes is None or not value:
            return value
        return self._bytes.sub(MASK.encode(), value)

    def suspects(self, raw: bytes) -> bool:
        """Whether ``raw`` may spell a secret (cheap; false positives only cost time)."""
        if self._bytes is None:
            return False
        lowered = raw.lower()
        if b"\\u" in lowered:
            return True
        probes = self._probes
        if len(probes) == 1:  # the usual case, without a generator's overhead
            return probes[0] in lowered
        return any(probe in lowered for probe in probes)

    def chunk(self, chunk: dict[str, Any], raw: bytes) -> tuple[dict[str, Any], bytes]:
        """Masks a decoded chunk and its JSON text; both come back unchanged when clean."""
        if not self.suspects(raw):
            return chunk, raw
        cleaned = self.value(chunk)
        if cleaned is not chunk:
            return cleaned, orjson.dumps(cleaned)
        masked = self.data(raw)
        return chunk, masked if masked == raw else orjson.dumps(chunk)

    def value(self, value: Any) -> Any:
        """Masks every string (keys included) of a decoded JSON value.

        Returns the same object when nothing was masked, a masked copy otherwise.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            pairs = [(self.value(k), self.value(v)) for k, v in value.items()]
            changed = any(
                nk is not k or nv is not v
                for (nk, nv), (k, v) in zip(pairs, value.items(), strict=True)
            )
            return dict(pairs) if changed else value
        if isinstance(value, list):
            items = [self.value(item) for item in value]
            return items if any(n is not o for n, o in zip(items, value, strict=True)) else value
        return value


def url_secrets(url: str) -> list[str]:
    """Credentials embedded in ``url``: the userinfo and secret-looking query values."""
    try:
        parts = urlsplit(url)
        found = [value for value in (parts.username, parts.password) if value]
        found += [unquote(value) for value in found]
        found += [v for k, v in parse_qsl(parts.query) if k.lower() in _QUERY_SECRETS and v]
    except ValueError:
        return []
    return found


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user:pass@`` (sent as ``Authorization: Basic``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return bool(parts.username or parts.password)


def redact_url(url: str) -> str:
    """``url`` with its userinfo and secret query values replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = MASK + "@" + netloc.rpartition("@")[2]
        query = "&".join(
            f"{quote(k, safe='')}={MASK if k.lower() in _QUERY_SECRETS else quote(v, safe='')}"
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return MASK
