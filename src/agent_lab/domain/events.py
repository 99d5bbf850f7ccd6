"""Tool-call events and the inline event block markers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

EVENT_BLOCK_START = "<event>"
"""Opens an inline event block in the chat agent's text (``dual_agent`` mode)."""

EVENT_BLOCK_END = "</event>"
"""Closes an inline event block."""

TOOL_NAME_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}"
"""What a tool's registry name may be: what an event block can name (letters, digits,
``_``, ``.`` and ``-``, not starting with ``.`` or ``-``, at most 64 characters)."""


class ToolCallEvent(BaseModel):
    """One request to run a tool, from an inline event block or a provider tool call."""

    id: str
    """Unique within the session; provider tool calls keep the provider's id."""
    name: str
    """The registry name of the tool (never a provider alias)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments; ``{}`` for text events until the event agent resolves them."""
    raw_arguments: str = "{}"
    """The argument text exactly as the provider sent it (kept when it is not valid JSON)."""
