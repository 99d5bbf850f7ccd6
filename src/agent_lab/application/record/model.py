"""The turn record's shape (``record_version`` 1): one true account of one turn.

Every part of a turn the lab shows has a place here: each model call (its role, the
request as sent by reference, timings split by phase, usage, cost), each event with
its resolved arguments and how they were resolved, each tool execution, every failure
with its reason code, and the rounds as the runtime ran them. Items carry the ``seq``
of the audit that opened them; ``entries`` lists every audit the record was built
from, in order. The record only grows: items are appended, and an item's state moves
from ``running`` to its final state once.

Figures the runtime could not know are ``None``, never zero: a cost is ``None`` when
the model is unpriced or the provider reported no usage; a timing is ``None`` when the
client did not measure it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_lab.domain.messages import TokenUsage

RECORD_VERSION: Literal[1] = 1

CallState = Literal["running", "succeeded", "failed", "cancelled"]
TurnState = Literal["running", "completed", "terminated", "failed", "cancelled"]
ModelCallRole = Literal["chat", "follow_up", "argument_fallback", "argument_generation"]
"""``chat``: the first chat call of a turn; ``follow_up``: a chat call after tool
results; the other two are the event agent's forced calls (DESIGN.md §5)."""
CutOff = Literal["length", "content_filter"]
"""Finish reasons that cut an answer off: ``max_tokens`` reached, or a content filter."""
ResolvedBy = Literal[
    "model", "resolver", "argument_fallback", "argument_generation", "empty", "not_resolved"
]
"""``model``: the chat model wrote the arguments (``chat_agent_tools``); ``resolver``:
the tool's argument resolver, no model call; ``argument_fallback`` /
``argument_generation``: a forced call of the event agent; ``empty``: no resolver and
the empty arguments fit the schema; ``not_resolved``: an unknown or disabled tool."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordEntry(_Part):
    """One audit the record was built from."""

    seq: int
    event: str
    at_ms: int | None
    """``turn_elapsed_ms`` of the audit."""


class FailureRecord(_Part):
    """A failure: a machine-readable reason and the readable message that goes with it."""

    seq: int
    reason: str
    """e.g. ``provider_error:http_503``, ``cancelled``, ``tool_failed:unknown_tool``."""
    message: str
    where: Literal["turn", "model_call", "argument", "tool"]
    ref: str | None = None
    """The metric key of the call or tool execution it belongs to."""


class RequestRef(_Part):
    """Where the request as sent is kept: an audit of this turn (secrets scrubbed)."""

    audit: Literal["chat_agent_request", "event_agent_request"]
    audit_seq: int
    """The ``seq`` of that audit in ``entries``."""
    message_count: int
    tool_count: int


class CallTimings(_Part):
    """Where the time of one model call went, in milliseconds."""

    warmup_ms: float | None = None
    """Client warm-up the call waited for (``None`` when the client does not say)."""
    connect_ms: float | None = None
    """Request sent (after warm-up) to response headers: connection, retries, queueing."""
    provider_first_chunk_ms: float | None = None
    """The provider's time to first chunk, never including client warm-up."""
    visible_ttft_ms: int | None = None
    """Chat calls: round start to the first visible text, client warm-up left out."""
    stream_ms: float | None = None
    """First chunk to the end of the stream."""
    latency_ms: int | None = None
    """Request to the end of the stream, as the runtime measured it."""
    attempts: int | None = None


class CostRecord(_Part):
    amount_usd: Decimal | None = None
    """``None``: unknown (see ``unknown_reason``), never zero for lack of a price."""
    unknown_reason: str | None = None
    price_source: str | None = None


class ModelCallRecord(_Part):
    seq: int
    metric_key: str
    role: ModelCallRole
    round_index: int
    event_id: str | None = None
    model: str | None = None
    request: RequestRef | None = None
    status: CallState = "running"
    started_ms: int | None = None
    ended_ms: int | None = None
    timings: CallTimings = Field(default_factory=CallTimings)
    usage: TokenUsage | None = None
    cost: CostRecord = Field(default_factory=CostRecord)
    cold: bool | None = None
    """The call paid client warm-up, or was the first of its client in the process
    (``None`` while it runs or when the turn ended before it did)."""
    cold_reasons: list[str] = Field(default_factory=list)
    finish_reason: str | None = None
    """Why the provider ended the answer: ``stop``, ``tool_calls``, ``length`` (cut off
    at ``max_tokens``), ``content_filter``…; ``None`` when it said nothing."""
    failure_reason: str | None = None
    """Why the call failed (the turn's reason when the turn failed during the call)."""


class EventRecord(_Part):
    seq: int
    event_id: str
    event_name: str
    round_index: int
    source: str | None = None
    arguments: dict[str, Any] | None = None
    """The resolved arguments (``None`` until they are known)."""
    resolved_by: ResolvedBy | None = None
    resolver: str | None = None
    """The resolver's name, when the tool has one (also when it failed)."""
    argument_call: str | None = None
    """The metric key of the forced call that generated the arguments."""
    argument_failures: list[dict[str, str]] = Field(default_factory=list)


class CappedResult(_Part):
    original_chars: int
    sha256: str
    head: str


class ToolExecutionRecord(_Part):
    seq: int
    metric_key: str
    event_id: str
    event_name: str
    round_index: int
    scope: str
    arguments: dict[str, Any] | None = None
    status: CallState = "running"
    result: Any = None
    """The payload the model was given (``None`` while running or when capped)."""
    result_capped: CappedResult | None = None
    latency_ms: int | None = None
    policy: str | None = None
    coalesced_ids: list[str] = Field(default_factory=list)
    """Calls of the same batch answered by this execution."""
    deduplicated_from: str | None = None
    """Set on a coalesced duplicate: the call whose execution answered it (it did not
    run itself)."""
    failure_reason: str | None = None


RecoveredStatus = Literal["succeeded", "failed", "unknown", "not_executed"]
"""What the effect ledger knew of a call of an interrupted batch (DESIGN.md §9.4)."""


class RecoveredCallRecord(_Part):
    """A call of an earlier, interrupted batch that this turn reported to the model.

    ``unknown`` (dispatched, no outcome: it may have run) and ``not_executed`` (intent
    only) are uncertain effects; the lab shows the call so wherever it appears.
    """

    seq: int | None
    """The ``seq`` of the ``turn_started`` audit that listed it; ``None`` when the
    ``session_started`` audit of a restore did (it is not part of a turn)."""
    batch_id: str
    turn_index: int
    """The turn the call ran in (an earlier one)."""
    round_index: int
    event_id: str
    event_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: RecoveredStatus
    idempotency_key: str | None = None
    note: str | None = None
    """``outcome unknown — check before repeating`` or ``not executed — …``."""


class RoundRecord(_Part):
    seq: int
    round_index: int
    status: CallState = "running"
    offered_events: list[str] = Field(default_factory=list)
    model_call: str | None = None
    """The metric key of the round's chat call."""
    text: str = ""
    """What the chat agent said (event blocks removed)."""
    spoken: list[str] = Field(default_factory=list)
    """The runtime's own sentences after the batch: template confirmations, farewell."""
    event_ids: list[str] = Field(default_factory=list)
    ignored_event_names: list[str] = Field(default_factory=list)
    """dual_agent: names in event blocks that were not on offer (no event)."""
    batch_scope: str | None = None
    decision: dict[str, bool] | None = None
    visible_ttft_ms: int | None = None
    elapsed_ms: int | None = None
    cut_off: CutOff | None = None
    """The chat call's answer was stopped before the model finished it: ``length``
    (it reached ``max_tokens``) or ``content_filter`` (the provider's filter)."""


class CostSummary(_Part):
    """The turn's cost: a total and its split by role (``None`` when any part is unknown)."""

    total_usd: Decimal | None = Decimal(0)
    known_usd: Decimal = Decimal(0)
    """The dollars of the calls whose cost is known."""
    unpriced_calls: int = 0
    by_role: dict[str, Decimal | None] = Field(default_factory=dict)


class TurnRecord(_Part):
    """One turn, as the runtime ran it."""

    record_version: Literal[1] = RECORD_VERSION
    session_id: str | None
    turn_index: int
    mode: str | None = None
    status: TurnState = "running"
    user_message: str | None = None
    wall_time_ms: int | None = None
    """Turn start to its closing audit (measured, never summed)."""
    round_count: int = 0
    failure: FailureRecord | None = None
    """Why the turn did not complete (``failed`` or ``cancelled``)."""
    rounds: list[RoundRecord] = Field(default_factory=list)
    model_calls: list[ModelCallRecord] = Field(default_factory=list)
    events: list[EventRecord] = Field(default_factory=list)
    tool_executions: list[ToolExecutionRecord] = Field(default_factory=list)
    failures: list[FailureRecord] = Field(default_factory=list)
    recovered_calls: list[RecoveredCallRecord] = Field(default_factory=list)
    """Calls of earlier interrupted batches this turn gave back to the model."""
    cost: CostSummary = Field(default_factory=CostSummary)
    entries: list[RecordEntry] = Field(default_factory=list)
