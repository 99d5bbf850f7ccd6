"""Token estimates and the prefix cache behind ``cached_tokens``.

Tokens are estimated as characters / 4 plus a small per-message overhead. The cache
remembers a hash chain over every request's message prefixes (rooted in the model
and the tool schemas, which real providers put first): the cached part of a new
request is its longest remembered prefix, rounded down to a multiple of 64 tokens.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from agent_lab.infrastructure.simulator.request import ChatRequest, Message

CACHE_GRANULARITY = 64
_MESSAGE_OVERHEAD = 4
_PROMPT_OVERHEAD = 3


@dataclass(frozen=True)
class PromptUsage:
    """The prompt side of a request's usage."""

    prompt_tokens: int
    cached_tokens: int


def text_tokens(text: str) -> int:
    """About four characters per token."""
    return math.ceil(len(text) / 4)


def message_tokens(message: Message) -> int:
    """A message's content, name and tool calls, plus the per-message overhead."""
    calls = "".join(
        call.function.name + call.function.arguments for call in message.tool_calls or []
    )
    return _MESSAGE_OVERHEAD + text_tokens(message.text + (message.name or "") + calls)


def _root_tokens(request: ChatRequest) -> int:
    schemas = [tool.model_dump(exclude_none=True) for tool in request.tools or []]
    return _PROMPT_OVERHEAD + (text_tokens(orjson.dumps(schemas).decode()) if schemas else 0)


class PrefixCache:
    """Remembers hashed message prefixes of past requests (bounded, least recent out)."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def measure(self, request: ChatRequest, raw: dict[str, Any]) -> PromptUsage:
        """Estimate the prompt, look its prefixes up, then remember them."""
        sizes = [_root_tokens(request), *(message_tokens(m) for m in request.messages)]
        chain = _prefix_chain(raw)
        with self._lock:
            matched = self._longest_known(chain)
            self._remember(chain)
        prompt = sum(sizes)
        cached = sum(sizes[: matched + 1]) if matched else 0
        cached = min(cached - cached % CACHE_GRANULARITY, prompt)
        return PromptUsage(prompt_tokens=prompt, cached_tokens=cached)

    def _longest_known(self, chain: Sequence[bytes]) -> int:
        matched = 0
        for key in chain:
            if key not in self._seen:
                break
            self._seen.move_to_end(key)
            matched += 1
        return matched

    def _remember(self, chain: Sequence[bytes]) -> None:
        for key in chain:
            self._seen[key] = None
            self._seen.move_to_end(key)
        while len(self._seen) > self._capacity:
            self._seen.popitem(last=False)


def _prefix_chain(raw: dict[str, Any]) -> list[bytes]:
    root = {"model": raw.get("model"), "tools": raw.get("tools")}
    digest = hashlib.sha256(orjson.dumps(root, option=orjson.OPT_SORT_KEYS)).digest()
    chain = []
    for message in raw.get("messages", []):
        encoded = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(digest + encoded).digest()
        chain.append(digest)
    return chain
