"""Builds the wire body of a streaming chat completion request (no I/O).

Registry tool names are replaced by provider-safe aliases everywhere they appear:
``tools``, ``tool_choice``, assistant ``tool_calls`` and the ``name`` of tool replies.
An assistant message whose calls came with reasoning the client remembers carries it
back as ``reasoning_content`` (see ``reasoning_memory``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import orjson

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.openai_compat.tool_names import ToolNameAliases

ReasoningLookup = Callable[[Iterable[str]], str | None]
"""The reasoning streamed with any of these tool-call ids, or ``None``."""

_RESERVED = frozenset({"stream", "messages"})
"""Body fields ``extra_body`` may not replace: the client always streams its transcript."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One request, ready for the SDK: the transcript, the other fields, and the aliases."""

    messages: list[dict[str, Any]]
    options: dict[str, Any]
    """Every body field except ``model``, ``messages`` and ``stream``."""
    aliases: ToolNameAliases


def build_chat_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[Mapping[str, Any]],
    params: AgentParams,
    tool_choice: Mapping[str, Any] | None,
    reasoning: ReasoningLookup | None = None,
) -> ChatRequest:
    """Converts a call of the ``ChatClient`` port into wire dicts.

    Args:
        messages: The (already validated) transcript.
        tools: OpenAI function schemas under registry names.
        params: The agent's model parameters; ``extra_body`` is merged last.
        tool_choice: A forced call under a registry name, or ``None``.
        reasoning: Finds the reasoning streamed with an assistant message's calls.

    Returns:
        The request with every tool name aliased consistently.
    """
    aliases = ToolNameAliases(_mentioned_names(messages, tools, tool_choice))
    options: dict[str, Any] = {
        "temperature": params.temperature,
        "stream_options": {"include_usage": True},
    }
    if params.max_tokens is not None:
        options["max_tokens"] = params.max_tokens
    if params.top_p is not None:
        options["top_p"] = params.top_p
    if tools:
        options["tools"] = [_aliased_function(tool, aliases) for tool in tools]
    if tool_choice is not None:
        options["tool_choice"] = _aliased_function(tool_choice, aliases)
    options.update((k, v) for k, v in params.extra_body.items() if k not in _RESERVED)
    wire = alternating([wire_message(message, aliases, reasoning) for message in messages])
    return ChatRequest(messages=wire, options=options, aliases=aliases)


def alternating(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``wire`` with each run of plain user (or assistant) messages in a row folded into
    one, their texts joined by a blank line (a text the run repeats, as when the user
    sends again the message whose turn failed, once).

    Alternation-strict chat templates (vLLM or llama.cpp serving Mistral, Gemma or
    Llama-2 models) refuse such a run, which a session leaves behind whenever a turn
    ended before an answer (a provider failure, a cancellation) or a recovery note
    follows the user's message. Folded, every text still reaches the model, and a
    provider that accepts runs reads the same conversation. Tool calls, tool replies
    and non-text content are never folded.
    """
    if not any(a["role"] == b["role"] and _repeats(a, b) for a, b in pairwise(wire)):
        return wire
    folded: list[dict[str, Any]] = []
    texts: list[str] = []  # of the run being folded
    for message in wire:
        if folded and _repeats(folded[-1], message):
            if message["content"] and message["content"] not in texts:
                texts.append(message["content"])
            folded[-1] = {"role": message["role"], "content": "\n\n".join(texts)}
        else:
            folded.append(message)
            content = message.get("content")
            texts = [content] if isinstance(content, str) and content else []
    return folded


def _repeats(previous: dict[str, Any], message: dict[str, Any]) -> bool:
    return (
        message["role"] == previous["role"]
        and message["role"] in ("user", "assistant")
        and isinstance(message.get("content"), str)
        and isinstance(previous.get("content"), str)
        and not (message.get("tool_calls") or previous.get("tool_calls"))
    )


def wire_message(
    message: ChatMessage, aliases: ToolNameAliases, reasoning: ReasoningLookup | None = None
) -> dict[str, Any]:
    """Converts one ``ChatMessage`` to the chat completions wire format.

    Args:
        message: The message.
        aliases: The request's name map (tool names only; a user's ``name`` is kept).
        reasoning: Finds the reasoning streamed with an assistant message's calls; a
            message whose calls it knows gets it as ``reasoning_content``.

    Returns:
        The wire dict; an assistant message with calls but no text has ``content: null``.
    """
    if message.role == "tool":
        wire: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content,
        }
        if message.name:
            wire["name"] = aliases.to_provider(message.name)
        return wire
    wire = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        if reasoning is not None:
            text = reasoning(call.id for call in message.tool_calls)
            if text is not None:
                wire["reasoning_content"] = text
        # An empty string, not null: llama.cpp's server answers 500 to a null content.
        wire["tool_calls"] = [_wire_call(call, aliases) for call in message.tool_calls]
    if message.name:
        wire["name"] = message.name
    return wire


def _wire_call(call: ToolCallEvent, aliases: ToolNameAliases) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": aliases.to_provider(call.name), "arguments": _argument_text(call)},
    }


def _argument_text(call: ToolCallEvent) -> str:
    """The model's own argument text when it encodes ``arguments``, else ``arguments`` as JSON.

    Malformed text is not sent back: strict servers parse the arguments of past calls.
    """
    try:
        if orjson.loads(call.raw_arguments) == call.arguments:
            return call.raw_arguments
    except orjson.JSONDecodeError:
        pass
    return json.dumps(call.arguments)


def _aliased_function(value: Mapping[str, Any], aliases: ToolNameAliases) -> dict[str, Any]:
    function = value.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return dict(value)
    return {**value, "function": {**function, "name": aliases.to_provider(function["name"])}}


def _mentioned_names(
    messages: Sequence[ChatMessage],
    tools: Sequence[Mapping[str, Any]],
    tool_choice: Mapping[str, Any] | None,
) -> Iterator[str]:
    for value in [*tools, *([tool_choice] if tool_choice is not None else [])]:
        function = value.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            yield function["name"]
    for message in messages:
        yield from (call.name for call in message.tool_calls)
        if message.role == "tool" and message.name:
            yield message.name
