"""Tool-call events and the inline event block markers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

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


class CutOffToolCall(ToolCallEvent):
    """A provider tool call the provider stopped writing: the answer ended with
    ``finish_reason`` ``length`` (the ``max_tokens`` limit) or ``content_filter`` while
    its arguments were still incomplete. It dumps as any call does (the text as far as
    it came); the registry refuses to run it (``cut_off_reason``)."""

    _finish_reason: str = PrivateAttr(default="length")

    @classmethod
    def of(cls, event: ToolCallEvent, finish_reason: str) -> CutOffToolCall:
        """``event`` marked as cut off by ``finish_reason``."""
        call = cls(**event.model_dump())
        call._finish_reason = finish_reason
        return call

    @property
    def finish_reason(self) -> str:
        return self._finish_reason

    @property
    def cut_off_reason(self) -> str:
        """Why the call is not run, in the words of its tool reply."""
        why = (
            "the answer reached its max_tokens limit"
            if self._finish_reason == "length"
            else f"the provider stopped the answer (finish_reason {self._finish_reason})"
        )
        return f"cut off: {why} before the call's arguments were complete"
