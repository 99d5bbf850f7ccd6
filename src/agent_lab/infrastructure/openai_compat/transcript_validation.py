"""Checks that a transcript follows the tool protocol strict providers enforce (no I/O).

Every ``tool`` message must answer a call declared by the assistant message that opened
the current batch, every declared call must be answered before the next non-``tool``
message (and before the transcript ends), and no tool-call id may appear twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_lab.domain.errors import InvalidTranscript
from agent_lab.domain.messages import ChatMessage


def validate_tool_transcript(messages: Sequence[ChatMessage]) -> None:
    """Raises if a strict OpenAI-compatible provider would reject the transcript.

    Args:
        messages: The transcript about to be sent.

    Raises:
        InvalidTranscript: (a ``ValueError``) naming the first problem and the index of
            the message that shows it.
    """
    declared: set[str] = set()
    open_calls: dict[str, None] = {}
    for position, message in enumerate(messages):
        if message.role == "tool":
            _check_reply(position, message, open_calls, declared)
            continue
        if open_calls:
            raise InvalidTranscript(
                f"tool calls {_names(open_calls)} are unanswered before the "
                f"{message.role} message at index {position}"
            )
        if message.role == "assistant":
            for call in message.tool_calls:
                if call.id in declared:
                    raise InvalidTranscript(
                        f"duplicate tool-call id {call.id!r} in the assistant message "
                        f"at index {position}"
                    )
                declared.add(call.id)
                open_calls[call.id] = None
    if open_calls:
        raise InvalidTranscript(
            f"tool calls {_names(open_calls)} are unanswered at the end of the transcript"
        )


def _check_reply(
    position: int, message: ChatMessage, open_calls: dict[str, None], declared: set[str]
) -> None:
    call_id = message.tool_call_id
    if not call_id:
        raise InvalidTranscript(f"tool message at index {position} has no tool_call_id")
    if call_id in open_calls:
        del open_calls[call_id]
        return
    if call_id in declared:
        raise InvalidTranscript(
            f"tool message at index {position} answers call {call_id!r} again, or after "
            "its batch ended"
        )
    raise InvalidTranscript(
        f"tool message at index {position} answers call {call_id!r}, which no preceding "
        "assistant message declared"
    )


def _names(calls: dict[str, None]) -> str:
    return ", ".join(repr(call_id) for call_id in calls)
