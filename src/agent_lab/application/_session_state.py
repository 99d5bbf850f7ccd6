"""State shared by the turns of one session, and of one turn."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_lab.application import _outputs
from agent_lab.application._event_replies import Resolving
from agent_lab.application._recording import (
    NULL_RECORDER,
    FinishedTurn,
    MemoryRecorder,
    Recorder,
)
from agent_lab.application._recovery import NO_RECOVERY, Recovery
from agent_lab.application._restore import RowRepair
from agent_lab.application._transcript import History, RequestPrefix, request_prefix
from agent_lab.application.contracts import DebugRunRequest, ToolInvocationMode
from agent_lab.application.events import EventResult
from agent_lab.application.session_store import CallMetric
from agent_lab.domain.errors import AgentLabError, PersistenceFailed
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

TurnStatus = Literal["completed", "terminated", "failed", "cancelled"]


@dataclass(slots=True)
class SessionState:
    request: DebugRunRequest
    session_id: str | None
    """The persisted id; ``None`` when no store is attached."""
    scope_prefix: str
    history: History
    """Everything after the pre-messages that the chat agent will see again."""
    next_turn_index: int
    recorder: Recorder
    """A ``SessionRecorder``; without a store, ``NULL_RECORDER`` until the first batch
    (``batch_recorder()``)."""
    one_shot: bool
    seen_call_ids: AbstractSet[str] = frozenset()
    """Provider call ids of the session so far (a set is made by its first batch)."""
    prefix: RequestPrefix = field(init=False)
    """System prompts and pre-messages, the same for every chat call."""
    terminated: bool = False
    repairs: Sequence[RowRepair] = ()
    """Stored rows the restore had to repair (audited in ``session_started``)."""
    recovery: Recovery = NO_RECOVERY
    """Effects of interrupted batches, for the model with the next turn (DESIGN.md §9.4)."""
    lost_batch: bool = False
    """A batch of this session was abandoned: read the journal before the next turn."""
    unacknowledged: tuple[str, ...] = ()
    """Batches whose note is in the history but went out with no chat request yet."""

    def __post_init__(self) -> None:
        self.prefix = request_prefix(self.request)

    def batch_recorder(self) -> Recorder:
        """The recorder a batch writes through: without a store, the session's own
        ``MemoryRecorder``, made by its first batch (until then it shares one)."""
        if self.recorder is NULL_RECORDER:
            self.recorder = MemoryRecorder()
        return self.recorder

    def note_call_ids(self, ids: Iterable[str]) -> None:
        self.seen_call_ids = {*self.seen_call_ids, *ids}

    @property
    def mode(self) -> ToolInvocationMode:
        return self.request.tool_invocation_mode


@dataclass(slots=True)
class OpenBatch:
    """A batch begun and not yet committed: its journal id and how far its calls got,
    kept for the turn's record should the turn end in the middle of it."""

    batch_id: str
    dispatched: dict[str, ToolCallEvent] = field(default_factory=dict)
    """The calls whose handlers were started, by call id (journaled as dispatched)."""
    landed: dict[str, ChatMessage] = field(default_factory=dict)
    """The results made durable (and shown) so far, by call id."""
    results: dict[str, EventResult] = field(default_factory=dict)
    """The same calls' outcomes, with the status and latency their metrics take."""

    def land(self, result: EventResult, message: ChatMessage) -> None:
        self.landed[result.event_id] = message
        self.results[result.event_id] = result


@dataclass(slots=True)
class TurnState:
    index: int
    origin: float
    budget: int
    round_index: int = 0
    metrics: tuple[CallMetric, ...] = ()
    """The turn's calls so far (a tuple: no list is made for a turn still streaming)."""
    open_batch: OpenBatch | None = None
    """The batch begun but not yet committed."""
    unfinished: OpenBatch | None = None
    """The batch the turn ended in the middle of: its results made durable before it
    ended, with their figures, go to the turn's closing audit."""
    streaming_text: list[str] = field(default_factory=list)
    """The deltas shown of the round streaming now, until its response is audited."""
    unfinished_call: dict[str, Any] | None = None
    """The figures of the chat call the turn ended in the middle of (it broke off or
    was cancelled), for the turn's closing audit."""
    recovered: tuple[str, ...] = ()
    """Journal ids of interrupted batches this turn reported to the model."""
    cancelled_ahead: bool = False
    """Cancelled before it started: once on record it ends as cancelled, no round run."""
    resolving: tuple[Resolving, ...] = ()
    """How far the events of the ``dual_agent`` batch running now got with their
    arguments (the event agent keeps them up to date)."""
    answer: ChatMessage | None = None
    """The turn's answer, in the history already, written with the turn's close
    (``Recorder.closes_with_answer``): one transaction for both, not two."""
    unfinished_resolutions: dict[str, Any] | None = None
    """The resolutions and argument calls of a batch the turn ended in the middle of,
    for the turn's closing audit (``event_agent_response``'s shape)."""

    def note_resolving(self, progress: Resolving) -> None:
        self.resolving = (*self.resolving, progress)


@dataclass(frozen=True)
class TurnOutcome:
    status: TurnStatus
    failure: AgentLabError | None = None
    """Why a ``failed`` or ``cancelled`` turn ended; it names its own reason."""


async def close_turn(
    session: SessionState, turn: TurnState, outcome: TurnOutcome, ended: float
) -> TurnOutcome:
    """Persist how ``turn`` ended; a failure to persist fails a turn that had not failed."""
    recorder = session.recorder
    # The note goes out with the turn's first chat request; a turn that ended before
    # it hands its batches on to the next turn, whose request carries the note.
    recovered = turn.recovered if turn.round_index else ()
    if not turn.round_index:
        session.unacknowledged = turn.recovered
    try:
        await recorder.finish_turn(
            FinishedTurn(
                turn.index,
                list(turn.metrics),
                status=outcome.status,
                wall_time_ms=_outputs.elapsed_ms(turn.origin, ended),
                round_count=turn.round_index,
                failure=outcome.failure,
                recovered=recovered,
                messages=() if turn.answer is None else (turn.answer,),
            )
        )
    except PersistenceFailed as exc:
        if outcome.failure is None:
            return TurnOutcome("failed", exc)
    return outcome
