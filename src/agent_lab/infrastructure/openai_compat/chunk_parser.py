"""Turns the byte stream of one chat completion into ``StreamItem``s (no I/O).

``ChunkStream`` owns the per-stream state: the SSE decoder, the tool-call accumulator,
the inline event parser and the last usage report. Every provider chunk becomes a
``raw_chunk`` item; visible text, events, completed tool calls and usage follow from it.
Secrets are masked after JSON decoding, in the chunk dict and in its JSON text alike.
``progress`` counts chunks that carried something (text, reasoning, tool calls, a finish
reason or usage); SSE comments and empty events leave it alone, so the client's idle
deadline can ignore keep-alives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from agent_lab.domain.errors import ProviderProtocolError
from agent_lab.domain.messages import StreamItem, TokenUsage
from agent_lab.infrastructure.openai_compat.secret_mask import SecretMask
from agent_lab.infrastructure.openai_compat.sse import SseDecoder, SseEvent
from agent_lab.infrastructure.openai_compat.text_events import TextEventParser, new_event_id
from agent_lab.infrastructure.openai_compat.tool_call_accumulator import ToolCallAccumulator

_DONE = b"[DONE]"
_PREVIEW = 200
CUT_OFF_REASONS = frozenset({"length", "content_filter"})
"""Finish reasons that mean the answer was stopped before the model finished it."""
_CONTENT_KEYS = frozenset(
    {"content", "tool_calls", "function_call", "reasoning_content", "reasoning", "refusal"}
)


def _identity(name: str) -> str:
    return name


class ChunkStream:
    """Parses one streamed chat completion, from raw body bytes to ``StreamItem``s."""

    __slots__ = (
        "_calls",
        "_decoder",
        "_done",
        "_finish_reason",
        "_finished",
        "_mask",
        "_reasoning",
        "_text",
        "_usage",
        "progress",
    )

    def __init__(
        self,
        *,
        text_events: bool,
        new_call_id: Callable[[], str],
        resolve_name: Callable[[str], str] = _identity,
        new_event: Callable[[], str] = new_event_id,
        mask: SecretMask | None = None,
    ) -> None:
        """Creates the state of one stream.

        Args:
            text_events: Parse inline event blocks out of the visible text (no tools sent).
            new_call_id: Supplies ids for tool calls the provider sent without one.
            resolve_name: Maps provider function names back to registry names.
            new_event: Supplies the id of every inline event.
            mask: Masks secrets in every chunk (after decoding) and in error messages.
        """
        self._decoder = SseDecoder()
        self._calls = ToolCallAccumulator(new_id=new_call_id, resolve_name=resolve_name)
        self._text = TextEventParser(new_event) if text_events else None
        self._mask = mask if mask else None
        self.progress = 0
        """How many chunks carried content of any kind so far."""
        self._usage: dict[str, Any] | None = None
        self._finished = False
        self._finish_reason: str | None = None
        self._done = False
        self._reasoning: list[str] | None = None

    def feed(self, data: bytes) -> list[StreamItem]:
        """Parses the next read of the response body.

        Raises:
            ProviderProtocolError: A chunk is not JSON, or carries an error object.
        """
        items: list[StreamItem] = []
        for event in self._decoder.feed(data):
            self._event(event, items)
        return items

    def reported_usage(self) -> TokenUsage | None:
        """The last usage report so far (``None`` before one arrived)."""
        return token_usage(self._usage) if self._usage is not None else None

    def finish(self) -> list[StreamItem]:
        """Ends the stream: held-back text, pending calls and the usage report.

        Raises:
            ProviderProtocolError: The stream ended with neither a ``finish_reason`` nor
                ``[DONE]`` (a truncated answer), or its last chunk is malformed.
        """
        items: list[StreamItem] = []
        for event in self._decoder.flush():
            self._event(event, items)
        if not (self._finished or self._done):
            raise ProviderProtocolError(
                "the stream ended before the provider finished the answer "
                "(no finish_reason and no [DONE])"
            )
        self._complete(items)
        if self._usage is not None:
            items.append(StreamItem.usage_item(token_usage(self._usage)))
        return items

    @property
    def reasoning(self) -> str | None:
        """The ``reasoning_content`` streamed so far; ``None`` when no delta had the field."""
        return None if self._reasoning is None else "".join(self._reasoning)

    @property
    def finish_reason(self) -> str | None:
        """The first ``finish_reason`` of the answer (``stop``, ``length``, ``tool_calls``,
        ``content_filter``…); ``None`` before it came or when the provider sent none."""
        return self._finish_reason

    @property
    def finished(self) -> bool:
        """A ``finish_reason`` arrived: the answer is complete, even if ``[DONE]`` never does."""
        return self._finished

    @property
    def done(self) -> bool:
        """``[DONE]`` arrived: the answer is over, whatever the body still holds."""
        return self._done

    def _event(self, event: SseEvent, items: list[StreamItem]) -> None:
        data = event.data
        if self._done:
            return  # after the end marker: a proxy's or server's trailer, not the answer
        if data.startswith(_DONE):
            self._done = True
            return
        if event.event == "error":
            raise ProviderProtocolError(
                f"the provider reported an error: {_error_event_text(data, self._mask)}"
            )
        if not data.strip():
            return  # an empty event, sent by some proxies to keep the connection alive
        mask = self._mask
        chunk = _load(data, mask)
        if mask is not None:
            chunk, data = mask.chunk(chunk, data)
        if chunk.get("error") or chunk.get("object") == "error":
            raise ProviderProtocolError(f"the provider reported an error: {_error_text(chunk)}")
        items.append(StreamItem.raw_response_chunk(chunk, data))
        choices = chunk.get("choices")
        if choices and isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict) and choice.get("index", 0) in (0, None):
                    self._choice(choice, items)
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):
            self._usage = usage
            self.progress += 1

    def _choice(self, choice: dict[str, Any], items: list[StreamItem]) -> None:
        delta = choice.get("delta")
        if delta and isinstance(delta, dict):
            if _CONTENT_KEYS.intersection(delta):
                self.progress += 1
            if "reasoning_content" in delta:
                self._reasoning_delta(delta["reasoning_content"])
            content = delta.get("content")
            if content and isinstance(content, str):
                self._content(content, items)
            elif content and isinstance(content, list):  # typed parts: their text
                text = _text_parts(content)
                if text:
                    self._content(text, items)
            tool_calls = delta.get("tool_calls")
            if tool_calls and isinstance(tool_calls, list):
                for call in tool_calls:
                    if isinstance(call, dict):
                        self._calls.add(call)
            function_call = delta.get("function_call")
            if function_call and isinstance(function_call, dict):
                self._calls.add_legacy_function_call(function_call)
        reason = choice.get("finish_reason")
        if reason:
            self.progress += 1
            self._finished = True
            if self._finish_reason is None:
                self._finish_reason = reason if isinstance(reason, str) else str(reason)
            self._complete(items)

    def _reasoning_delta(self, part: object) -> None:
        if self._reasoning is None:
            self._reasoning = []
        if part and isinstance(part, str):
            self._reasoning.append(part)

    def _content(self, content: str, items: list[StreamItem]) -> None:
        if self._text is None:
            items.append(StreamItem.message_delta(content))
            return
        for piece in self._text.feed(content):
            if isinstance(piece, str):
                items.append(StreamItem.message_delta(piece))
            else:
                items.append(StreamItem.text_event(piece))

    def _complete(self, items: list[StreamItem]) -> None:
        if self._text is not None:
            for piece in self._text.finish():
                if isinstance(piece, str):
                    items.append(StreamItem.message_delta(piece))
                else:
                    items.append(StreamItem.text_event(piece))
        reason = self._finish_reason
        cut_off = reason if reason in CUT_OFF_REASONS else None
        calls = self._calls.drain(cut_off)
        items.extend(StreamItem.provider_tool_call(call) for call in calls)


def _text_parts(parts: list[Any]) -> str:
    """The text of ``content`` sent as a list of typed parts (``[{"type": "text",
    "text": "..."}]``, as some servers stream it); parts of other types carry no text."""
    return "".join(
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type", "text") in ("text", "output_text")
        and isinstance(part.get("text"), str)
    )


def token_usage(usage: dict[str, Any]) -> TokenUsage:
    """Reads a provider usage object, with cached tokens from ``prompt_tokens_details``.

    DeepSeek's ``prompt_cache_hit_tokens`` is used when no details are reported.
    """
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=_count(usage.get("total_tokens")) or prompt + completion,
        cached_tokens=cached or _count(usage.get("prompt_cache_hit_tokens")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _load(data: bytes, mask: SecretMask | None) -> dict[str, Any]:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ProviderProtocolError(f"malformed stream chunk: {_preview(data, mask)}") from None
    if not isinstance(chunk, dict):
        raise ProviderProtocolError(f"stream chunk is not a JSON object: {_preview(data, mask)}")
    return chunk


def _preview(data: bytes, mask: SecretMask | None) -> str:
    if mask is not None:
        data = mask.data(data)
    text = data[:_PREVIEW].decode("utf-8", "replace")
    return text + ("…" if len(data) > _PREVIEW else "")


def _error_event_text(data: bytes, mask: SecretMask | None) -> str:
    """The message of an ``error`` event (``event: error`` or llama.cpp's ``error:``
    field): a JSON object's message, else the text itself, secrets masked."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = None
    if mask is not None:
        value = mask.value(value)
    if isinstance(value, dict):
        return _error_text(value)
    if isinstance(value, str) and value:
        return value
    text = _preview(data.strip(), mask)
    return text or "no message"


def _error_text(chunk: dict[str, Any]) -> str:
    error = chunk.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) and message else orjson.dumps(error).decode()
    if isinstance(error, str) and error:
        return error
    message = chunk.get("message")
    return message if isinstance(message, str) and message else orjson.dumps(chunk).decode()
