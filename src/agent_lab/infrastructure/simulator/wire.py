"""OpenAI wire shapes for the simulator: chunks, frames, completions, errors.

A reply becomes a list of ``Frame``s; each frame is one ``chat.completion.chunk`` and
says how many generated tokens it costs, which is what the latency model paces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from agent_lab.domain.events import EVENT_BLOCK_START
from agent_lab.infrastructure.simulator.planner import PlannedCall, Reply
from agent_lab.infrastructure.simulator.usage import PromptUsage

SYSTEM_FINGERPRINT = "fp_agent_lab_sim"
DONE = b"data: [DONE]\n\n"
_WORD = re.compile(r"\s*\S+|\s+")
_MAX_WORD = 8
_WORD_PIECE = 6
_ARGUMENT_PIECE = 6


@dataclass(frozen=True)
class CompletionMeta:
    """The fields every chunk of one completion repeats."""

    id: str
    created: int
    model: str
    include_usage: bool = False


@dataclass(frozen=True)
class Frame:
    """One chunk to send and the generated tokens it stands for (0 = no pacing)."""

    chunk: dict[str, Any]
    tokens: int


def split_pieces(text: str) -> list[str]:
    """Word pieces with their leading space; long words are cut into short pieces."""
    pieces: list[str] = []
    for word in _WORD.findall(text):
        if len(word.strip()) <= _MAX_WORD:
            pieces.append(word)
        else:
            pieces += [word[i : i + _WORD_PIECE] for i in range(0, len(word), _WORD_PIECE)]
    return pieces


def split_arguments(arguments: str) -> list[str]:
    """Argument JSON cut into short fragments, as models stream it."""
    return [arguments[i : i + _ARGUMENT_PIECE] for i in range(0, len(arguments), _ARGUMENT_PIECE)]


def completion_tokens(reply: Reply) -> int:
    """Generated tokens: one per content piece, per call name and per argument fragment."""
    calls = sum(1 + len(split_arguments(call.arguments)) for call in reply.tool_calls)
    return len(split_pieces(reply.content)) + calls


def truncate(reply: Reply, limit: int | None) -> Reply:
    """Cut a text-only reply to ``limit`` tokens (``finish_reason`` ``length``).

    Replies that act (tool calls or an event block) are never cut.
    """
    if limit is None or reply.tool_calls or EVENT_BLOCK_START in reply.content:
        return reply
    pieces = split_pieces(reply.content)
    if len(pieces) <= limit:
        return reply
    return Reply("".join(pieces[:limit]), finish_reason="length")


def frames(reply: Reply, meta: CompletionMeta) -> list[Frame]:
    """Every chunk of the stream, from the role delta to the finish chunk."""
    out = [Frame(chunk(meta, {"role": "assistant", "content": ""}), 0)]
    for position, piece in enumerate(split_pieces(reply.content)):
        out.append(Frame(chunk(meta, {"content": piece}), 0 if position == 0 else 1))
    for index, call in enumerate(reply.tool_calls):
        out += _call_frames(meta, index, call)
    out.append(Frame(chunk(meta, {}, reply.finish_reason), 0))
    return out


def _call_frames(meta: CompletionMeta, index: int, call: PlannedCall) -> list[Frame]:
    head = {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    out = [Frame(chunk(meta, {"tool_calls": [head]}), 1)]
    for piece in split_arguments(call.arguments):
        fragment = {"index": index, "function": {"arguments": piece}}
        out.append(Frame(chunk(meta, {"tool_calls": [fragment]}), 1))
    return out


def chunk(meta: CompletionMeta, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    body: dict[str, Any] = {
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if meta.include_usage:
        body["usage"] = None
    return body


def usage_chunk(meta: CompletionMeta, usage: dict[str, Any]) -> dict[str, Any]:
    """The trailing ``choices: []`` chunk sent when ``include_usage`` is set."""
    return {**chunk(meta, {}), "choices": [], "usage": usage}


def usage_body(prompt: PromptUsage, completion: int) -> dict[str, Any]:
    """OpenAI's usage object, including ``prompt_tokens_details.cached_tokens``."""
    return {
        "prompt_tokens": prompt.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": prompt.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def completion_body(reply: Reply, meta: CompletionMeta, usage: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return {
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
        ],
        "usage": usage,
    }


def sse(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def error_body(
    message: str, error_type: str = "invalid_request_error", param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error envelope."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": None}}
