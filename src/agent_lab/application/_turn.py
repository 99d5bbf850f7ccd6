"""The turn engine: chat rounds, tool batches and result policies (DESIGN.md §5–6).

One engine serves ``run()`` and ``start_session()``. A turn is a loop of rounds; each
round goes through the protocol's phases, in order::

    build request → stream → detect events → run batch → decide → persist → stats

and ends with a ``NextStep``: ``RunAgain`` (with its reason), ``Finish`` or
``Terminate``. What differs between the two tool modes is asked of the session's
``ToolMode``; what is written goes through the session's recorder (a null one without
a store).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Protocol, assert_never

from agent_lab.application import _audit_details, _outputs, _policies
from agent_lab.application._audit import Auditor
from agent_lab.application._batches import (
    BatchRun,
    EventServices,
    RoundContext,
    close_cut_off_batch,
    note_batch_metrics,
)
from agent_lab.application._chat_round import ChatRound, close_unfinished, stream_round
from agent_lab.application._metrics import (
    RawChunks,
    chat_metric,
    chat_metric_key,
)
from agent_lab.application._modes import ToolMode, mode_for
from agent_lab.application._policies import Finish, NextStep, PolicyDecision, RunAgain, Terminate
from agent_lab.application._recovery import NO_RECOVERY, KeptNote
from agent_lab.application._session_state import SessionState, TurnOutcome, TurnState
from agent_lab.application._transcript import chat_request_messages
from agent_lab.application.contracts import MAX_EVENT_LOOPS
from agent_lab.application.loop_lag import monitor_for
from agent_lab.application.ports import ChatClient
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.errors import (
    AgentLabError,
    InternalError,
    TurnLimitExceeded,
)
from agent_lab.domain.messages import ChatMessage

logger = logging.getLogger("agent_lab.application.runtime")


@dataclass(frozen=True)
class TurnLimits:
    """Hard caps per turn, whatever the request asks for (docs/runtime.md)."""

    max_rounds: int = MAX_EVENT_LOOPS + 1
    """The event budget allows at most ``max_event_loops + 1`` rounds; this is the
    backstop."""
    max_seconds: float = 600.0
    """Wall time from the turn's start to its last round."""


DEFAULT_TURN_LIMITS = TurnLimits()


class EngineDeps(Protocol):
    """What the engine uses of the session around it (the session's runner)."""

    client: ChatClient
    registry: ToolRegistry
    queues: RuntimeQueues
    auditor: Auditor
    limits: TurnLimits

    def event_services(self) -> EventServices: ...  # made on the first round with tools


def default_turn_limits() -> TurnLimits:
    return DEFAULT_TURN_LIMITS


class TurnEngine:
    """Runs the user turns of one session."""

    def __init__(self, deps: EngineDeps, session: SessionState) -> None:
        self.deps = deps
        self.session = session
        self.auditor = deps.auditor
        self.clock = deps.auditor.clock
        self.mode: ToolMode = mode_for(session.mode)

    def begin(self, origin: float) -> TurnState:
        """Start the next turn's timeline at ``origin``."""
        turn = TurnState(
            index=self.session.next_turn_index,
            origin=origin,
            budget=self.session.request.event_agent.max_event_loops,
        )
        self.session.next_turn_index += 1
        self.auditor.begin_turn(origin, turn.index)
        return turn

    async def run_turn(self, turn: TurnState, user: ChatMessage) -> TurnOutcome:
        """Run every round of one turn; failures come back as the outcome.

        The caller runs it in a task of its own and cancels that task to stop the turn
        (``cancel_turn``, or the wall-time limit ``deps.limits.max_seconds``).
        """
        chat: ChatRound | None = None
        try:
            await self._open_turn(turn, user)
            if turn.cancelled_ahead:  # on record now: it ends as a cancelled turn does
                raise asyncio.CancelledError
            while True:  # one round per pass, through the protocol's phases
                self._check_round_cap(turn)
                chat = await self._build_request(turn)
                await stream_round(self.deps.client, self.auditor, chat)
                step = await self._after_stream(turn, chat)
                match step:
                    case RunAgain():
                        continue
                    case Finish():
                        return TurnOutcome("completed")
                    case Terminate():
                        self.session.terminated = True
                        return TurnOutcome("terminated")
                    case _:
                        assert_never(step)
        except AgentLabError as exc:
            close_unfinished(turn, chat, self.mode.name)
            await self._abandon_open_batch(turn)
            return TurnOutcome("failed", exc)
        except asyncio.CancelledError:
            close_unfinished(turn, chat, self.mode.name, cancelled=True)
            await self._abandon_open_batch(turn, cancelled=True)
            raise
        except Exception as exc:  # a bug in a client or tool must not kill the session
            logger.exception("turn %s failed unexpectedly", turn.index)
            close_unfinished(turn, chat, self.mode.name)
            await self._abandon_open_batch(turn)
            return TurnOutcome("failed", InternalError(f"turn failed: {exc}"))

    def _check_round_cap(self, turn: TurnState) -> None:
        cap = self.deps.limits.max_rounds
        if turn.round_index >= cap:
            raise TurnLimitExceeded("rounds", f"limit of {cap} rounds")

    async def _open_turn(self, turn: TurnState, user: ChatMessage) -> None:
        session = self.session
        lost = session.lost_batch
        if lost:  # a batch of an earlier turn was abandoned: read what became of it
            session.recovery = await session.recorder.unreported()
            session.lost_batch = False  # only once read: a failed read is tried again
        if not session.one_shot:
            details = _audit_details.turn_started(turn.index)
            if lost and session.recovery:
                details["recovered_calls"] = session.recovery.audit_entries()
            await self.auditor.emit("turn_started", details)
            await self.deps.queues.output.put(_outputs.turn_started(turn.index))
        # Once turn_started is out, the turn must be on record even if it is cancelled
        # right away: the write finishes, and the cancellation then closes the turn.
        recovery = session.recovery
        note = self.mode.recovery_note(recovery) if recovery else None
        kept = KeptNote(note, recovery.batch_ids) if self.mode.keeps_recovery_note else None
        await session.recorder.start_turn(turn.index, user, kept if recovery else None)
        session.history.append(user)
        self._deliver_recovery(turn, note, reported=kept is not None)

    def _deliver_recovery(
        self, turn: TurnState, note: ChatMessage | None, *, reported: bool
    ) -> None:
        """Interrupted batches' effects follow the user message, once (DESIGN.md §9.4);
        the batches of a note stored with the turn are ``reported`` already."""
        session = self.session
        recovery, session.recovery = session.recovery, NO_RECOVERY
        if note is not None:
            session.history.append(note)
        pending = () if reported else recovery.batch_ids
        turn.recovered = (*session.unacknowledged, *pending)
        session.unacknowledged = ()

    async def _abandon_open_batch(self, turn: TurnState, *, cancelled: bool = False) -> None:
        batch_id = close_cut_off_batch(turn, self.mode.name, cancelled=cancelled)
        if batch_id is not None:
            recorder = self.session.recorder
            await recorder.abandon_batch(batch_id)
            self.session.lost_batch = True

    async def _after_stream(self, turn: TurnState, streamed: ChatRound) -> NextStep:
        """Detect events → run batch → decide → persist → stats (the turn's loop
        awaits the stream itself: no frame of the round's lives while it streams)."""
        await self._audit_response(turn, streamed)
        events = streamed.detected_events()
        if not events:
            await self._persist_answer(turn, streamed)
            step: NextStep = Finish()
        else:
            turn.budget -= 1
            ctx = self._round_context(turn)
            batch = await self.mode.run_batch(ctx, streamed)
            decision = await self._decide(ctx, batch, streamed)
            user_spoke = await self._persist_batch(ctx, batch, decision)
            step = _policies.next_step(decision, user_spoke=user_spoke)
        await self._stats(turn, streamed)
        return step

    async def _build_request(self, turn: TurnState) -> ChatRound:
        """The next round's request, audited as ``chat_round_started`` and
        ``chat_agent_request``."""
        turn.round_index += 1
        started, loop_started = self.clock(), asyncio.get_running_loop().time()
        session = self.session
        configured = list(session.request.event_agent.enabled_tools)
        offer = self.mode.offer(self.deps.registry, configured if turn.budget > 0 else [])
        await self.auditor.emit(
            "chat_round_started",
            _audit_details.chat_round_started(
                turn.index,
                turn.round_index,
                session.mode,
                offered=offer.events,
                configured=configured,
                prompt_events=offer.prompt_events,
                budget=turn.budget,
            ),
        )
        sent = chat_request_messages(session.prefix, session.history, offer.catalog)
        params = session.request.chat_agent
        requested_at = await self.auditor.emit(
            "chat_agent_request",
            _audit_details.chat_agent_request(
                turn.index,
                turn.round_index,
                session.mode,
                params=params,
                tools=offer.tools,
                messages=sent.dumps,
            ),
        )
        return ChatRound(
            round_index=turn.round_index,
            messages=sent.messages,
            offer=offer,
            params=params,
            seen_call_ids=session.seen_call_ids,
            started=started,
            loop_started=loop_started,
            requested_at=requested_at,
            measure_provider_ttft=session.recorder.persistent,
            parts=turn.streaming_text,
        )

    async def _audit_response(self, turn: TurnState, streamed: ChatRound) -> None:
        """The ``chat_agent_response`` audit; raw chunks decoded late (``Auditor.emit``)."""
        call = streamed.call
        answered_at = self.clock()
        call.latency_ms = _outputs.elapsed_ms(streamed.requested_at, answered_at)
        details = _audit_details.chat_agent_response(
            turn.index,
            turn.round_index,
            self.session.mode,
            content=streamed.content,
            events=streamed.events,
            raw_chunks=[],  # filled in by ``RawChunks``
            chunk_offsets_ms=call.chunk_offsets_ms,
            usage=call.usage,
            visible_ttft_ms=streamed.ttft_ms,
            provider_ttft_ms=call.ttft_ms,
            call=_audit_details.model_call(call, chat_metric_key(turn.index, turn.round_index)),
            ignored_event_names=streamed.ignored_event_names,
        )
        fill = RawChunks(call, details, keep_texts=self.session.recorder.persistent)
        await self.auditor.emit("chat_agent_response", details, now=answered_at, complete=fill)
        turn.streaming_text = []  # the response audit holds the round's text now
        streamed.answered = True
        mode, index = self.mode.name, turn.round_index
        turn.metrics += (chat_metric(call, turn_index=turn.index, round_index=index, mode=mode),)

    def _round_context(self, turn: TurnState) -> RoundContext:
        services = self.deps.event_services()
        return RoundContext(
            session=self.session,
            turn=turn,
            scope=f"{self.session.scope_prefix}:turn-{turn.index}:round-{turn.round_index}",
            auditor=self.auditor,
            executor=services.executor,
            event_agent=services.event_agent,
        )

    async def _persist_answer(self, turn: TurnState, streamed: ChatRound) -> None:
        if not (content := streamed.content).strip():
            return
        answer = ChatMessage(role="assistant", content=content)
        self.session.history.append(answer)
        if self.session.recorder.closes_with_answer:  # the turn ends next: one write
            turn.answer = answer  # for both (``FinishedTurn.messages``)
        else:
            await self.session.recorder.append_messages(turn.index, [answer])

    async def _decide(
        self, ctx: RoundContext, batch: BatchRun, streamed: ChatRound
    ) -> PolicyDecision:
        """Audit the batch's results and the policy's decision about them."""
        round_index = ctx.turn.round_index
        await self.auditor.emit(
            "event_batch_results",
            _audit_details.event_batch_results(ctx.scope, round_index, batch.result),
        )
        decision = _policies.decide(
            batch.result, chat_spoke=bool(streamed.content.strip()), registry=self.deps.registry
        )
        await self.auditor.emit(
            "event_policy_decision",
            _audit_details.event_policy_decision(
                ctx.scope, round_index, decision.audit_details(), decision.spoken
            ),
        )
        if decision.terminate:
            await self.auditor.emit(
                "terminal_completed",
                _audit_details.terminal_completed(ctx.scope, decision.terminal_event_ids),
            )
        return decision

    async def _persist_batch(
        self, ctx: RoundContext, batch: BatchRun, decision: PolicyDecision
    ) -> bool:
        """Commit the batch with what follows it; True when the user spoke meanwhile."""
        turn, spoken = ctx.turn, decision.spoken
        closing = [ChatMessage(role="assistant", content=" ".join(spoken))] if spoken else []
        follow_ups = await self._take_user_input() if self.session.one_shot else []
        if turn.open_batch is not None:
            await self.session.recorder.commit_batch(
                turn.open_batch.batch_id, [*batch.persisted, *closing, *follow_ups]
            )
        turn.open_batch = None
        self.session.history.extend([*batch.transcript, *closing, *follow_ups])
        for text in spoken:
            await self.deps.queues.output.put(_outputs.message_delta(text))
        ctx.executor.release_scope(ctx.scope)
        note_batch_metrics(turn, batch, self.mode.name)
        return bool(follow_ups)

    async def _take_user_input(self) -> list[ChatMessage]:
        """One-shot runs: user input that arrived while the tools ran follows the batch."""
        taken: list[ChatMessage] = []
        queue = self.deps.queues.input
        while not queue.empty():
            message = as_user_message(await queue.get())
            if message is not None:
                taken.append(message)
        return taken

    async def _stats(self, turn: TurnState, streamed: ChatRound) -> None:
        elapsed = _outputs.elapsed_ms(streamed.started, self.clock())
        await self.deps.queues.output.put(
            _outputs.round_stats(
                turn.round_index,
                streamed.ttft_ms,
                elapsed,
                streamed.call.usage,
                bool(streamed.events),
            )
        )
        finished = _audit_details.chat_round_finished(
            turn.index, turn.round_index, elapsed_ms=elapsed, visible_ttft_ms=streamed.ttft_ms
        )
        loop = asyncio.get_running_loop()
        finished["loop_lag_ms"] = monitor_for(loop).max_between(streamed.loop_started, loop.time())
        await self.auditor.emit("chat_round_finished", finished)


def as_user_message(item: Any) -> ChatMessage | None:
    """A user turn from an input item (a ``ChatMessage`` or plain text), else ``None``."""
    if isinstance(item, str):
        return ChatMessage(role="user", content=item)
    if isinstance(item, ChatMessage) and item.role == "user" and item.name != "event_agent":
        return item
    return None
