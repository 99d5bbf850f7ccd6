"""Size limits of what a client may send: one WebSocket message and every field of a
``start`` request. A request over a limit is refused with an error naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import ValidationError

from agent_lab.application.contracts import MAX_EVENT_LOOPS, DebugRunRequest

MAX_MESSAGE_CHARS = 1_000_000
"""One client message (a ``start`` with all its prompts included)."""
MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest WebSocket message ``agent-lab serve`` reads at all (uvicorn's
``ws_max_size``): one between this and ``MAX_MESSAGE_CHARS`` gets an error frame naming
its field, a larger one is closed with 1009 (the page then says it was too large)."""
MAX_USER_MESSAGE = 100_000
MAX_PROMPT = 50_000
MAX_PROMPTS = 20
MAX_PRE_MESSAGES = 200
MAX_PRE_MESSAGE = 20_000
MAX_PRE_MESSAGES_TOTAL = 200_000
MAX_NAME = 200
MAX_TOOLS = 100
MAX_EXTRA_BODY = 10_000
MAX_TOKENS = 1_000_000
MAX_PARALLEL_EVENTS = 64


class LimitExceeded(ValueError):
    """A field over its limit; ``field`` is its dotted path, the text is safe to send."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def check_message_size(text: str) -> None:
    """Raises ``LimitExceeded`` for a client message over ``MAX_MESSAGE_CHARS``.

    The error names the field that made it too long (``request.system_prompts.0``)
    when the message is a ``start`` whose request shows one, else ``message``.
    """
    if len(text) <= MAX_MESSAGE_CHARS:
        return
    whole = f"the message is longer than {MAX_MESSAGE_CHARS} characters"
    culprit = _oversized_field(text)
    if culprit is None:
        raise LimitExceeded("message", f"longer than {MAX_MESSAGE_CHARS} characters")
    raise LimitExceeded(culprit.field, f"{culprit.problem} ({whole})")


def _oversized_field(text: str) -> LimitExceeded | None:
    """The first field over its limit in an over-long ``start`` message, if any."""
    try:
        message = orjson.loads(text)
        fields: dict[str, Any] = message["request"] if message.get("type") == "start" else {}
        request = DebugRunRequest.model_validate({**fields, "session_id": "size-check"})
    except (orjson.JSONDecodeError, ValidationError, AttributeError, KeyError, TypeError):
        return None
    try:
        check_request(request)
    except LimitExceeded as exc:
        return exc
    return None


def check_request(request: DebugRunRequest) -> None:
    """Raises ``LimitExceeded`` for the first field of ``request`` over its limit."""
    _text("request.user_message", request.user_message, MAX_USER_MESSAGE)
    _list("request.system_prompts", request.system_prompts, MAX_PROMPTS)
    for index, prompt in enumerate(request.system_prompts):
        _text(f"request.system_prompts.{index}", prompt, MAX_PROMPT)
    _total("request.system_prompts", request.system_prompts, MAX_PROMPT * 2)
    contents = [str(message.content or "") for message in request.pre_messages]
    _list("request.pre_messages", contents, MAX_PRE_MESSAGES)
    for index, content in enumerate(contents):
        _text(f"request.pre_messages.{index}.content", content, MAX_PRE_MESSAGE)
    _total("request.pre_messages", contents, MAX_PRE_MESSAGES_TOTAL)
    for name, agent in (("chat_agent", request.chat_agent), ("event_agent", request.event_agent)):
        where = f"request.{name}"
        _text(f"{where}.model", agent.model or "", MAX_NAME)
        _text(f"{where}.system_prompt", agent.system_prompt, MAX_PROMPT)
        _number(f"{where}.max_tokens", agent.max_tokens or 0, MAX_TOKENS)
        size = len(orjson.dumps(agent.extra_body))
        if size > MAX_EXTRA_BODY:
            raise LimitExceeded(f"{where}.extra_body", f"larger than {MAX_EXTRA_BODY} bytes")
    event = request.event_agent
    _list("request.event_agent.enabled_tools", event.enabled_tools, MAX_TOOLS)
    for index, tool in enumerate(event.enabled_tools):
        _text(f"request.event_agent.enabled_tools.{index}", tool, MAX_NAME)
    _number("request.event_agent.max_event_loops", event.max_event_loops, MAX_EVENT_LOOPS)
    _number(
        "request.event_agent.max_parallel_events", event.max_parallel_events, MAX_PARALLEL_EVENTS
    )


def _text(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise LimitExceeded(field, f"longer than {limit} characters")


def _list(field: str, values: Sequence[object], limit: int) -> None:
    if len(values) > limit:
        raise LimitExceeded(field, f"more than {limit} items")


def _total(field: str, values: Sequence[str], limit: int) -> None:
    if sum(len(value) for value in values) > limit:
        raise LimitExceeded(field, f"longer than {limit} characters in all")


def _number(field: str, value: float, limit: float) -> None:
    if value > limit:
        raise LimitExceeded(field, f"greater than {limit}")
