"""The vocabulary of the output protocol and of the runtime's queues (DESIGN.md §4).

Every message on ``queues.output`` is a plain ``dict``; these ``TypedDict``s describe
them, so a consumer that narrows on ``message["type"]`` gets its fields type-checked::

    async for message in session:
        if message["type"] == "message_delta":
            print(message["content"], end="")
        elif message["type"] == "error":
            print(message["message"], message.get("failure_reason"))

Nothing here changes the wire format: the dicts are exactly what ``json`` writes. The
types also validate with pydantic (``TypeAdapter(OutputMessage)``), e.g. for a consumer
that reads the protocol back from JSON lines.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypeAlias

# typing_extensions: pydantic validates these on Python 3.11 too
from typing_extensions import TypedDict

from agent_lab.domain.errors import ExitClass
from agent_lab.domain.messages import ChatMessage

__all__ = [
    "TERMINAL_TYPES",
    "AuditDetails",
    "AuditMessage",
    "AuditName",
    "ChatMessageDump",
    "DoneMessage",
    "ErrorMessage",
    "EventDump",
    "EventMessage",
    "FailureReason",
    "InputItem",
    "MessageDeltaMessage",
    "OutputMessage",
    "OutputType",
    "RoundStatsMessage",
    "SessionStartedMessage",
    "TokenUsageDump",
    "ToolResultMessage",
    "TurnCompletedMessage",
    "TurnStartedMessage",
    "UsageMessage",
]

OutputType: TypeAlias = Literal[
    "session_started",
    "turn_started",
    "message_delta",
    "usage",
    "event",
    "tool_result",
    "round_stats",
    "turn_completed",
    "done",
    "error",
    "audit",
]

TERMINAL_TYPES: frozenset[OutputType] = frozenset({"done", "error"})
"""The types that end a one-shot ``run()``."""

FailureReason: TypeAlias = str
"""``provider_error:http_<status>``, ``provider_error:{unreachable,timeout,protocol}``,
``protocol_error``, ``session_persistence_failed:<kind>``, ``session_busy``,
``cancelled``, ``internal_error`` (see docs/runtime.md)."""

AuditName: TypeAlias = Literal[
    "session_started",
    "turn_started",
    "chat_round_started",
    "chat_agent_request",
    "chat_message_stream_started",
    "chat_event_detected",
    "chat_message_stream_finished",
    "chat_agent_response",
    "event_batch_started",
    "event_agent_request",
    "event_agent_response",
    "event_agent_completed",
    "provider_tools_completed",
    "event_batch_results",
    "event_policy_decision",
    "terminal_completed",
    "chat_round_finished",
    "turn_completed",
    "session_finished",
]


class TokenUsageDump(TypedDict):
    """``TokenUsage.model_dump()``."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int


class EventDump(TypedDict):
    """``ToolCallEvent.model_dump()``."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str


class ChatMessageDump(TypedDict):
    """``ChatMessage.model_dump()``: exactly five keys."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str | None
    tool_call_id: str | None
    tool_calls: list[EventDump]


class SessionStartedMessage(TypedDict):
    type: Literal["session_started"]
    session_id: NotRequired[str]
    """Present when the session is persisted."""


class TurnStartedMessage(TypedDict):
    type: Literal["turn_started"]
    turn_index: int


class MessageDeltaMessage(TypedDict):
    type: Literal["message_delta"]
    content: str


class UsageMessage(TypedDict):
    """One model call's token usage: a chat call's, or an argument call's (the event
    agent's); a turn's ``usage`` messages add up to its stored tokens."""

    type: Literal["usage"]
    usage: TokenUsageDump


class EventMessage(TypedDict):
    type: Literal["event"]
    event: EventDump


class ToolResultMessage(TypedDict):
    type: Literal["tool_result"]
    message: ChatMessageDump
    """A ``tool`` message, in call order, once it is durable."""


class RoundStatsMessage(TypedDict):
    type: Literal["round_stats"]
    round_index: int
    ttft_ms: int | None
    """Visible time to first text of the round; ``None`` when it said nothing."""
    elapsed_ms: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int
    had_event: bool


class TurnCompletedMessage(TypedDict):
    type: Literal["turn_completed"]
    turn_index: int
    round_count: int


class DoneMessage(TypedDict):
    type: Literal["done"]


class ErrorMessage(TypedDict):
    type: Literal["error"]
    message: str
    failure_reason: NotRequired[FailureReason]
    exit_class: NotRequired[ExitClass]
    """``usage``, ``run_failed`` or ``interrupted``: what kind of failure, for exit codes."""


class AuditDetails(TypedDict, total=False):
    """The fields of ``audit.details`` a consumer may rely on; each audit adds its own."""

    turn_elapsed_ms: Required[int]
    """Milliseconds since the turn began; never decreases within a turn."""
    turn_index: int
    round_index: int
    round_count: int
    status: str
    """``turn_completed``: ``completed``, ``terminated``, ``failed`` or ``cancelled``."""
    session_id: str | None


class AuditMessage(TypedDict):
    type: Literal["audit"]
    event: AuditName
    details: AuditDetails


OutputMessage: TypeAlias = (
    SessionStartedMessage
    | TurnStartedMessage
    | MessageDeltaMessage
    | UsageMessage
    | EventMessage
    | ToolResultMessage
    | RoundStatsMessage
    | TurnCompletedMessage
    | DoneMessage
    | ErrorMessage
    | AuditMessage
)
"""One message of ``queues.output``; narrow it on ``message["type"]``."""

InputItem: TypeAlias = ChatMessage | str | None
"""What a consumer puts on ``queues.input``: a user turn (a ``user`` ``ChatMessage`` or
plain text), or ``None`` to close the session. The event agent answers on the same
queue with ``tool`` messages and an ``EventBatchDone`` (see ``event_agent``)."""
