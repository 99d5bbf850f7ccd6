"""The reasoning a provider streamed with its tool calls, kept to send back (no I/O).

DeepSeek's thinking mode streams ``reasoning_content`` next to the answer, and it
rejects a request whose assistant message with ``tool_calls`` lacks that message's
``reasoning_content`` (HTTP 400 "Missing `reasoning_content` field in the assistant
message"), in that turn's later rounds and in every later turn alike. Messages carry no
reasoning (the transcript and the store keep what the user and the tools saw), so the
client remembers it by tool-call id and adds it to the wire message that carries those
calls. Only calls whose stream had a ``reasoning_content`` field are remembered (an
empty one as ``""``: the field must be present even then); other providers' requests
are unchanged.

The memory is per client and bounded: the least recently used ids are forgotten first.
A new process, or a call older than the bound, goes out without its reasoning.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from agent_lab.domain.messages import StreamItem

__all__ = ["ReasoningMemory"]

DEFAULT_CAPACITY = 2048
"""Tool-call ids remembered per client."""


class ReasoningMemory:
    """An LRU map from tool-call id to the reasoning streamed with that call."""

    __slots__ = ("_capacity", "_texts")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._texts: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._texts)

    def keep(self, item: StreamItem, reasoning: str | None) -> None:
        """Remembers ``reasoning`` (the stream's so far) for a tool call ``item``."""
        if reasoning is not None and item.kind == "provider_tool_call" and item.event:
            self.remember(item.event.id, reasoning)

    def remember(self, call_id: str, reasoning: str) -> None:
        """Keeps ``reasoning`` for ``call_id``, forgetting the oldest id when full."""
        texts = self._texts
        texts[call_id] = reasoning
        texts.move_to_end(call_id)
        while len(texts) > self._capacity:
            texts.popitem(last=False)

    def recall(self, call_ids: Iterable[str]) -> str | None:
        """The reasoning of the first of ``call_ids`` remembered, or ``None``."""
        texts = self._texts
        for call_id in call_ids:
            text = texts.get(call_id)
            if text is not None:
                texts.move_to_end(call_id)
                return text
        return None
