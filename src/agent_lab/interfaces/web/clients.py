"""The provider client of a session that names its own endpoint or key in the page."""

from __future__ import annotations

from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.web.protocol import ConnectionOverride


def own_client(
    lab: Lab, connection: ConnectionOverride | None
) -> OpenAICompatibleChatClient | None:
    """A separate client for ``connection`` (closed with its session), or ``None`` to use
    the lab's own. An endpoint override without a key sends no key; only a key for the
    lab's own endpoint falls back to the lab's key."""
    if connection is None or connection.is_empty():
        return None
    settings = lab.settings
    base_url = (connection.base_url or "").strip() or lab.base_url or ""
    key = connection.key()
    if key is None and base_url == lab.base_url:
        key = settings.secret_key()
    return OpenAICompatibleChatClient(
        base_url,
        api_key=key,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        transport=settings.transport,
    )
