"""The store ports: what the runtime needs from durable session storage, by role.

``TranscriptStore`` (sessions, turns, the visible transcript), ``BatchJournal`` (the
write-ahead tool journal, DESIGN.md §9), ``SessionClaims`` (one writer per session)
and ``MetricsStore`` (audits and call metrics). ``SessionStore`` is their union, the
port the runtime takes; code and test doubles that need one role implement only it.

Adapters: ``agent_lab.infrastructure.sqlite_store.SQLiteSessionStore`` (a real SQLite
file) and ``agent_lab.testing.InMemorySessionStore`` (the same store on SQLite's
``:memory:``). Methods are synchronous and short; the runtime calls them off the event
loop, except through ``WritesNow.write_now``, which a store offers only for writes it
can make on the loop without waiting (the SQLite store: see ``sqlite.write_now``).

Errors: unknown session ids raise ``SessionNotFound``; failed writes raise
``PersistenceFailed`` with a classified ``reason``; a session driven by another live
runtime raises ``SessionBusy`` from ``claim_session``, and from ``delete_session``,
which deletes nothing while a live runtime (any process, this store's own included)
holds the session's claim; an expired or dead claimant's claim does not keep it. Once
a store has claimed a session, its writes to that session are fenced by the claim:
after another runtime takes the session over they raise
``PersistenceFailed("taken_over")`` and change nothing, and after something that
writes without a claim deleted the session, ``PersistenceFailed("deleted")``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

T = TypeVar("T")

CallKind = Literal["chat", "argument_fallback", "argument_generation", "tool_execution"]
CallAgent = Literal["chat_agent", "event_agent", "tool"]
CallStatus = Literal["succeeded", "failed", "unknown", "cancelled"]
"""An outcome ``record_result`` accepts."""
CallState = Literal["pending", "dispatched", "succeeded", "failed", "unknown", "cancelled"]
"""A journaled call: ``pending`` (intent, durable before any tool of its batch
starts), ``dispatched`` (durable right before its handler runs), then its outcome;
an abandoned batch's dispatched calls become ``unknown`` (the effect may have
happened) and its pending ones ``cancelled`` (it did not)."""
BatchState = Literal["pending", "committed", "cancelled", "failed"]

INTERRUPTED_REASON: Final = "interrupted"
"""The ``failure_reason`` of a turn whose runtime stopped before the turn ended (its
process died): the runtime that claims the session next closes the turn's row as
``failed`` with it (``_interrupted``), and the turn's record reads the same. The
journal still counts the turn as unfinished: its committed batches stay unreported
(``list_unreported_batches``) until a turn gives them back to the model."""
INTERRUPTED_MESSAGE: Final = "the runtime running this turn stopped before the turn ended"
"""The readable message that goes with ``INTERRUPTED_REASON``."""


class CallMetric(BaseModel):
    """One persisted model call or tool execution (DESIGN.md §7)."""

    metric_key: str
    """``chat:{turn}:{round}``, ``fallback:{turn}:{round}:{event}``,
    ``generation:{turn}:{round}:{event}`` or ``tool:{turn}:{round}:{event}``; unique per
    session (a second write with the same key replaces the first)."""
    turn_index: int
    round_index: int
    call_kind: CallKind
    agent: CallAgent
    mode: ToolInvocationMode
    model: str | None = None
    event_id: str | None = None
    event_name: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    usage_reported: bool = True
    """False when the provider sent no usage; the token fields are then zeros."""
    ttft_ms: int | None = None
    """Model calls: time from the request to the provider's first chunk."""
    latency_ms: int | None = None
    """Model calls: time from the request to the end of the stream."""
    tool_latency_ms: int | None = None
    """Tool executions: handler run time."""
    status: str | None = None
    finish_reason: str | None = None
    """Model calls: why the provider ended the answer (``stop``, ``tool_calls``,
    ``length`` when ``max_tokens`` cut it off, ``content_filter``); ``None`` when it
    gave none (a call that broke off, a provider that never says)."""


@dataclass(frozen=True, slots=True)
class BatchIntent:
    """A tool batch about to run: what ``BatchJournal.open_batch`` journals as pending.

    Attributes:
        turn_index: The turn the batch belongs to.
        round_index: The round that produced its events.
        scope: What the batch covers (for the journal's readers).
        mode: The session's tool invocation mode.
        events: The calls, in dispatch order; ids are unique within the batch.
        assistant: The assistant tool-call message (direct mode), journaled with it.
        visible: Messages appended to the committed transcript in the same write.
    """

    turn_index: int
    round_index: int
    scope: str
    mode: ToolInvocationMode
    events: list[ToolCallEvent]
    assistant: ChatMessage | None = None
    visible: list[ChatMessage] = field(default_factory=list)


@runtime_checkable
class TranscriptStore(Protocol):
    """Sessions, turns and the visible transcript."""

    def create_session(
        self, title: str, config: dict[str, Any], session_id: str | None = None
    ) -> str: ...
    def ensure_session(
        self, session_id: str, title: str, config: dict[str, Any]
    ) -> dict[str, Any]: ...
    def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    def list_sessions(self) -> list[dict[str, Any]]: ...
    def delete_session(self, session_id: str) -> None: ...

    def next_turn_index(self, session_id: str) -> int: ...
    def start_turn(
        self,
        session_id: str,
        turn_index: int,
        user_message: str,
        *,
        messages: list[ChatMessage] | None = None,
    ) -> None: ...
    def complete_turn(
        self,
        session_id: str,
        turn_index: int,
        *,
        status: str = "completed",
        wall_time_ms: int | None = None,
        round_count: int | None = None,
        failure_reason: str | None = None,
        failure_message: str | None = None,
    ) -> None: ...
    def list_turns(self, session_id: str) -> list[dict[str, Any]]: ...

    def append_message(self, session_id: str, turn_index: int, message: ChatMessage) -> int: ...
    def append_messages(
        self, session_id: str, turn_index: int, messages: list[ChatMessage]
    ) -> list[int]: ...
    def list_messages(
        self, session_id: str, include_pending: bool = False
    ) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


@runtime_checkable
class MetricsStore(Protocol):
    """The audit trail and per-call metrics."""

    def append_audit(
        self, session_id: str, turn_index: int | None, event: str, details: dict[str, Any]
    ) -> int: ...
    def append_audits(
        self, session_id: str, records: list[tuple[int | None, str, dict[str, Any]]]
    ) -> None: ...
    def list_audit_logs(
        self, session_id: str, *, after_id: int = 0, turn_index: int | None = None
    ) -> list[dict[str, Any]]:
        """Audit rows in order (after ``after_id``; of one turn when ``turn_index``)."""
        ...

    def append_usage(self, session_id: str, metric: CallMetric) -> None: ...
    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None: ...
    def usage_summary(self, session_id: str) -> dict[str, Any]: ...


@runtime_checkable
class BatchJournal(Protocol):
    """The write-ahead tool-batch journal (DESIGN.md §9).

    Adapters implement ``open_batch``; ``begin_batch`` (the keyword form) is defined
    here once and builds the ``BatchIntent`` for it.
    """

    def open_batch(self, session_id: str, intent: BatchIntent) -> str: ...

    def begin_batch(
        self,
        session_id: str,
        turn_index: int,
        round_index: int,
        *,
        scope: str,
        mode: ToolInvocationMode,
        events: list[ToolCallEvent],
        assistant: ChatMessage | None = None,
        visible: list[ChatMessage] | None = None,
    ) -> str:
        """Journal a batch as pending before any of its tools runs; return its id."""
        intent = BatchIntent(
            turn_index, round_index, scope, mode, list(events), assistant, list(visible or [])
        )
        return self.open_batch(session_id, intent)

    def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None: ...
    def mark_dispatched(self, batch_id: str, event_id: str, arguments: dict[str, Any]) -> None: ...
    def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None: ...
    def abandon_batch(self, batch_id: str, state: BatchState = "cancelled") -> None: ...
    def list_batches(self, session_id: str) -> list[dict[str, Any]]: ...
    def list_unreported_batches(self, session_id: str) -> list[dict[str, Any]]: ...
    def mark_reported(self, batch_ids: list[str], turn_index: int) -> None: ...


@runtime_checkable
class SessionClaims(Protocol):
    """One writer per session: leased claims, renewed by the claimant."""

    def claim_session(
        self,
        session_id: str,
        owner: str,
        *,
        lease_seconds: float = 30.0,
        wait_seconds: float = 0.0,
    ) -> str: ...
    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None: ...
    def release_claim(self, session_id: str, token: str) -> None: ...


@runtime_checkable
class ClaimListing(Protocol):
    """A store that can say which sessions live runtimes hold, in any process."""

    def live_claims(self) -> dict[str, str]: ...


@runtime_checkable
class SessionStore(TranscriptStore, MetricsStore, BatchJournal, SessionClaims, Protocol):
    """Durable sessions, turns, messages, audits, metrics, tool journal and claims."""


class NotNow(Exception):  # noqa: N818 (a signal to the caller, not a failure)
    """``write_now`` did not write: running the work now would have meant waiting, or
    it failed. Nothing was written; the caller runs the same work the usual way (in a
    worker thread), where any failure is classified as always."""


class WritesNow(Protocol):
    """A store that can run a short write on the calling thread (the event loop) when
    that needs no waiting; otherwise it raises ``NotNow`` having written nothing."""

    def write_now(self, work: Callable[[], T]) -> T: ...
