"""Keeps secret query values of request URLs out of the HTTP libraries' own log lines.

``httpx`` logs every request at INFO (``HTTP Request: POST http://host/v1/chat/completions?
api-key=… "HTTP/1.1 200 OK"``) and the openai SDK logs the URL at DEBUG. A base URL's
query (``?api-key=…``) is part of every request URL, so those lines would carry the key
for any application that turns logging on. A filter on those loggers shows every URL
argument as ``redact_url`` does (``?api-key=***``); nothing else about the records
changes.
"""

from __future__ import annotations

import logging

import httpx

from agent_lab.infrastructure.openai_compat.secret_mask import redact_url

__all__ = ["install_url_redaction"]

URL_LOGGERS = ("httpx", "openai._base_client")
"""The loggers whose records name request URLs (filters apply to a logger's own records)."""


class _RedactUrls(logging.Filter):
    """Replaces ``httpx.URL`` arguments of a record by their redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(arg, httpx.URL) for arg in args):
            record.args = tuple(
                redact_url(str(arg)) if isinstance(arg, httpx.URL) else arg for arg in args
            )
        return True


_FILTER = _RedactUrls()


def install_url_redaction() -> None:
    """Adds the filter to ``URL_LOGGERS`` (once: the same filter is never added twice)."""
    for name in URL_LOGGERS:
        logging.getLogger(name).addFilter(_FILTER)
