"""Masking of secrets in everything the web lab sends: frames, REST answers, errors.

A ``Masker`` replaces, with ``***``:

* each known key (the server's, and keys typed into the page) in any letter case and
  in its URL-encoded, base64 and JSON-escaped forms;
* credentials inside URLs (``https://user:pass@host``) and secret query parameters
  (``?api-key=…``, ``&token=…``, ``key=…``, ``sig=…``).

It also shortens provider error messages when the server is reachable from other
machines (``error_chars``), so the lab cannot be used to read arbitrary answers.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import orjson

MASK = "***"
_MIN_SECRET = 4
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"'<>]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&;](?:api[-_]?key|key|token|access[-_]?token|secret|password|passwd|sig|"
    r"signature|auth)=)[^&#\s\"'<>]+"
)


class Masker:
    """Masks a fixed set of secrets plus URL credentials in text."""

    def __init__(self, secrets: Iterable[str | None] = (), *, error_chars: int | None = None):
        self._secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len)
        self._pattern = _secrets_pattern(self._secrets)
        self.error_chars = error_chars

    def with_secret(self, secret: str | None) -> Masker:
        """This masker plus ``secret``."""
        return Masker([*self._secrets, secret], error_chars=self.error_chars)

    def text(self, value: str) -> str:
        """``value`` with every secret and URL credential replaced by ``***``."""
        if self._pattern is not None:
            value = self._pattern.sub(MASK, value)
        if "@" in value:
            value = _URL_CREDENTIALS.sub(rf"\1{MASK}@", value)
        if "=" in value:
            value = _SECRET_QUERY.sub(rf"\1{MASK}", value)
        return value

    def frame(self, text: str) -> str:
        """A JSON frame, masked; runtime error messages shortened to ``error_chars``."""
        text = self.text(text)
        if self.error_chars is None or '"type":"error"' not in text:
            return text
        return orjson.dumps(self._shorten(orjson.loads(text))).decode()

    def value(self, value: Any) -> Any:
        """A JSON-able value (a REST answer), masked."""
        dumped = orjson.dumps(value, default=str).decode()
        masked = self.text(dumped)
        return value if masked == dumped else orjson.loads(masked)

    def _shorten(self, frame: Any) -> Any:
        message = frame.get("message") if isinstance(frame, dict) else None
        target = message if isinstance(message, dict) else frame
        text = target.get("message") if isinstance(target, dict) else None
        limit = self.error_chars
        if isinstance(text, str) and limit is not None and len(text) > limit:
            target["message"] = text[:limit] + "…"
        return frame


def _secrets_pattern(secrets: list[str]) -> re.Pattern[str] | None:
    forms: set[str] = set()
    for secret in secrets:
        raw = secret.encode()
        forms.update(
            {
                secret,
                quote(secret, safe=""),
                base64.b64encode(raw).decode().rstrip("="),
                base64.urlsafe_b64encode(raw).decode().rstrip("="),
                orjson.dumps(secret).decode()[1:-1],
            }
        )
    if not forms:
        return None
    alternatives = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(alternatives, re.IGNORECASE)
