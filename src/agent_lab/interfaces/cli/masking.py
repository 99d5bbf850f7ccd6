"""What the CLI prints of a base URL: its credentials masked, as everywhere else.

``user:pass@`` and secret query values (``api-key=``, ``key=``, ``token=`` …) become
``***``, exactly as ``redact_url`` shows them in errors, the web lab and ``/api/health``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask, redact_url, url_secrets

if TYPE_CHECKING:
    from agent_lab.interfaces.lab import Lab

__all__ = ["endpoint_text", "redact_url"]


def endpoint_text(lab: Lab) -> str:
    """Which model endpoint the lab uses, its URL's credentials masked as everywhere else
    (``user:pass@`` and secret query values such as ``api-key=`` become ``***``)."""
    text = lab.endpoint_description
    for url in {lab.base_url, lab.settings.base_url} - {None, ""}:
        assert url is not None
        text = SecretMask(url_secrets(url)).text(text.replace(url, redact_url(url)))
    return text
