"""One session's life: open or restore it, run its turns, close it (DESIGN.md §8).

``run()`` / ``start()`` run one turn (``one_shot``); ``start_session()`` runs turns from
``queues.input`` until the input is closed (``None``) or a tool terminates the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from agent_lab.application import _audit_details, _outputs
from agent_lab.application._audit import Auditor
from agent_lab.application._batches import EventAgentLink, EventServices
from agent_lab.application._deadlines import deadlines_for
from agent_lab.application._opening import restored_state, unstored_state
from agent_lab.application._persistence import SessionRecorder
from agent_lab.application._recording import Recorder
from agent_lab.application._session_state import SessionState, TurnOutcome, TurnState, close_turn
from agent_lab.application._transcript import fold_title
from agent_lab.application._turn import (
    TurnEngine,
    TurnLimits,
    as_user_message,
    default_turn_limits,
)
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.event_agent import EventAgent, ReplyChannel
from agent_lab.application.events import EventBatchExecutor
from agent_lab.application.loop_lag import monitor_for
from agent_lab.application.ports import ChatClient, Clock
from agent_lab.application.queues import RuntimeQueues, drop_pending
from agent_lab.application.session_store import SessionStore
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.errors import (
    AgentLabError,
    InternalError,
    RunCancelled,
    TurnLimitExceeded,
)
from agent_lab.domain.messages import ChatMessage

logger = logging.getLogger("agent_lab.application.runtime")


@dataclass(eq=False, repr=False, slots=True, weakref_slot=True)
class SessionRunner:
    """Owns one session: its engine, its event agent task, and its recorder. (Slots:
    fields first set after ``__init__`` gave each runner a dictionary of its own.)"""

    request: DebugRunRequest
    _: KW_ONLY
    client: ChatClient
    registry: ToolRegistry
    queues: RuntimeQueues
    clock: Clock
    store: SessionStore | None
    one_shot: bool
    claim_wait_seconds: float = 0.0
    limits: TurnLimits = field(default_factory=default_turn_limits)
    auditor: Auditor = field(init=False)
    engine: TurnEngine | None = field(default=None, init=False)
    _services: EventServices | None = field(default=None, init=False)
    _event_agent_task: asyncio.Task[None] | None = field(default=None, init=False)
    _turn_task: asyncio.Task[Any] | None = field(default=None, init=False)
    """This runner's own task while it runs a turn (no task per turn)."""
    _turn_cancels: int = field(default=0, init=False)
    """Cancellations of that task asked for by ``cancel_turn`` or the time limit."""
    _turn_expired: bool = field(default=False, init=False)
    _ending: bool = field(default=False, init=False)  # ``end_now`` was called
    reading: bool = field(default=True, init=False)
    """It still reads ``queues.input``: a user turn put there either runs or is dropped."""
    turns_taken: int = field(default=0, init=False)  # user turns read from the input
    _cancels_ahead: int = field(default=0, init=False)  # turns to cancel as they start
    _dropped: tuple[str, ...] = field(default=(), init=False)  # unread user turns
    _opening: asyncio.Task[Any] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.auditor = Auditor(self.clock, self.queues.output)

    async def run(self) -> None:
        lag = monitor_for()
        lag.acquire()  # the loop's heartbeat runs while any session does
        try:
            origin = self.clock()
            session = await self._open()
            if session is None:
                return
            try:
                work = await self._begin(session, origin)
                if session.recorder.persistent:
                    await self._unless_taken_over(session.recorder, work)
                else:  # no store, no claim to lose
                    await work
            finally:
                await self._end(session)
        except Exception as exc:  # a bug must end the session with an error, not a hang
            logger.exception("session failed unexpectedly")
            await self.queues.output.put(_outputs.error(InternalError(f"session failed: {exc}")))
        finally:
            lag.release()

    async def _begin(self, session: SessionState, origin: float) -> Coroutine[Any, Any, None]:
        """Announce the session; returns its work: one turn, or turns until closed."""
        self.engine = TurnEngine(self, session)  # the runner is the engine's ``EngineDeps``
        waits_for_input = not self.one_shot and not self.request.user_message
        # The first turn's timeline starts now, unless it starts when input arrives.
        turn = None if waits_for_input else self.engine.begin(origin)
        if turn is None:
            self.auditor.begin_turn(origin, None)
        await self.auditor.emit("session_started", self._started_details(session))
        await self.queues.output.put(_outputs.session_started(session.session_id))
        if turn is not None and self.one_shot:
            return self._run_one_shot(turn)
        return self._serve_turns(turn)

    async def _end(self, session: SessionState) -> None:
        # The engine holds this runner (its ``EngineDeps``), and its event-agent link
        # calls back into it: reference cycles. Breaking them here frees the session
        # by reference counting, so finished sessions never wait for (and lengthen) a
        # full collection.
        self.engine = None
        await self._stop_event_agent()
        self._services = None  # its event-agent link calls back into this runner too
        await session.recorder.close()

    async def _unless_taken_over(self, recorder: Recorder, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work``; when another runtime takes the session over meanwhile, stop it
        and end the session with a ``taken_over`` error (its writes are fenced anyway).

        The recorder cancels this task on the loss (no watcher task per session); that
        cancellation is taken back here, so the session still ends as usual."""
        task = asyncio.current_task()
        assert task is not None
        recorder.stop_on_loss(task)
        try:
            if recorder.lost_to is None:
                await work
            else:
                work.close()
        except asyncio.CancelledError:
            if recorder.lost_to is None or task.uncancel() > 0:
                raise  # cancelled from outside, not (only) by the loss
        finally:
            recorder.stop_on_loss(None)
        if recorder.lost_to is not None:
            await self.queues.output.put(_outputs.error(recorder.lost_to))

    def end_now(self) -> None:
        """End the session now, in order: unstarted turns dropped, the running one (and
        one still starting) cancelled, then as usual (``session_finished``, ``done``)."""
        if self._ending:
            return
        self._ending = True
        if not self.one_shot:
            self._dropped += _user_turns(self.queues.close_input_now())
        if self._opening is not None:
            self._opening.cancel()
        self.cancel_turn()

    def cancel_turn(self) -> bool:
        """Cancel the turn in progress, if any; the session goes on."""
        task = self._turn_task
        if task is None:
            return False
        if asyncio.current_task() is task:  # from inside the turn: cancel it between steps,
            task.get_loop().call_soon(self._cancel_turn_task)  # so it lands inside the turn
            return True
        self._cancel_turn_task()
        return True

    def cancel_unstarted(self, sent: int) -> bool:
        """Cancel, as it starts, the next of the ``sent`` user turns still in the input
        (not one already marked so); whether there was one."""
        unstarted = min(sent - self.turns_taken, self.queues.input.qsize())
        if not self.reading or unstarted <= self._cancels_ahead:
            return False
        self._cancels_ahead += 1
        return True

    async def _open(self) -> SessionState | None:
        """The session's state, or ``None`` after an ``error`` output (claim released)."""
        if self.store is None:
            return unstored_state(self.request, one_shot=self.one_shot)
        session_id = self.request.session_id or uuid.uuid4().hex
        recorder = SessionRecorder(
            self.store, session_id, claim_wait_seconds=self.claim_wait_seconds
        )
        self._opening = asyncio.current_task()  # ``end_now`` cancels a wait for the claim
        try:
            return await self._open_stored(recorder)
        except (AgentLabError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and not self._opening_ended():
                raise
            await recorder.close()  # releases the writer claim at once
            await self.queues.output.put(_outputs.error(_closed_while_opening(exc)))
            return None
        finally:
            self._opening = None

    def _opening_ended(self) -> bool:
        """A cancellation of the opening came from ``end_now`` only (it is taken back)."""
        task = self._opening
        return self._ending and task is not None and task.uncancel() == 0

    async def _open_stored(self, recorder: SessionRecorder) -> SessionState:
        request = self.request
        stored = await recorder.open(
            request, fold_title(request.user_message) or "Untitled session"
        )
        self.auditor.session_id = recorder.session_id
        self.auditor.sink = recorder
        return restored_state(request, stored, recorder, one_shot=self.one_shot)

    def _started_details(self, session: SessionState) -> dict[str, Any]:
        details = _audit_details.session_started(
            session.session_id,
            session.mode,
            len(session.history),
            self.auditor.turn_index or session.next_turn_index,
        )
        if session.repairs:
            details["repaired_rows"] = [repair.audit_entry() for repair in session.repairs]
        if session.recovery:
            details["recovered_calls"] = session.recovery.audit_entries()
        return details

    async def _run_one_shot(self, turn: TurnState) -> None:
        assert self.engine is not None
        await self.queues.input.put(ChatMessage(role="user", content=self.request.user_message))
        user = await self._next_user_message()
        if user is None:
            return
        outcome = await self._run_turn(turn, user)
        ended = await self.auditor.emit(
            "session_finished", _audit_details.session_finished(turn, outcome)
        )
        outcome = await close_turn(self.engine.session, turn, outcome, ended)
        if outcome.failure is not None:
            await self.queues.output.put(_outputs.error(outcome.failure))
        else:
            await self.queues.output.put(_outputs.done())

    async def _serve_turns(self, first: TurnState | None) -> None:
        assert self.engine is not None
        turn: TurnState | None = first
        pending: ChatMessage | None = None
        if self.request.user_message:
            pending = ChatMessage(role="user", content=self.request.user_message)
        while True:
            user = pending or await self._next_user_message()
            pending = None
            if user is None:
                break
            if turn is None:
                turn = self.engine.begin(self.clock())
            outcome = await self._run_turn(turn, user)
            ended = await self.auditor.emit(
                "turn_completed", _audit_details.turn_completed(turn, outcome)
            )
            outcome = await close_turn(self.engine.session, turn, outcome, ended)
            await self._announce(turn, outcome)
            turn = None
            if outcome.status == "terminated":
                break
        self.reading = False  # what is still unread never runs: it is reported
        self._dropped += _user_turns(drop_pending(self.queues.input))
        dropped = {"dropped_messages": list(self._dropped)} if self._dropped else {}
        await self.auditor.emit("session_finished", _audit_details.session_finished() | dropped)
        await self.queues.output.put(_outputs.done())

    async def _announce(self, turn: TurnState, outcome: TurnOutcome) -> None:
        if outcome.failure is not None:
            message = _outputs.error(outcome.failure)
        else:
            message = _outputs.turn_completed(turn.index, turn.round_index)
        await self.queues.output.put(message)

    async def _run_turn(self, turn: TurnState, user: ChatMessage) -> TurnOutcome:
        """The turn, in this task: ``cancel_turn`` and the time limit cancel the task and
        are taken back here (``uncancel``); any other cancellation ends the session."""
        assert self.engine is not None
        limit = self.limits.max_seconds
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self._turn_task, self._turn_cancels, self._turn_expired = task, 0, False
        if self._ending:  # it started while the session was being ended
            self.cancel_turn()
        elif self._cancels_ahead:  # ``cancel_unstarted`` marked it
            self._cancels_ahead -= 1
            turn.cancelled_ahead = True
        deadlines = deadlines_for(loop)  # one timer for all the loop's turns
        deadlines.add(self, limit)
        try:
            outcome = await self.engine.run_turn(turn, user)
        except asyncio.CancelledError:
            if self._take_back_turn_cancels(task):
                raise  # the session itself is being cancelled
            await self._stop_event_agent()  # its batch died with the turn
            if self._turn_expired:
                return TurnOutcome("failed", TurnLimitExceeded("wall_time", f"{limit:g} s limit"))
            return TurnOutcome("cancelled", RunCancelled())
        finally:
            deadlines.remove(self)
            self._turn_task = None
            self._take_back_turn_cancels(task)  # asked for, but the turn ended first
        if outcome.status == "failed":
            await self._stop_event_agent()  # a batch it may still run died with the turn
        return outcome

    def _take_back_turn_cancels(self, task: asyncio.Task[Any]) -> bool:
        """Undo the turn's own cancellations of ``task``; whether others remain."""
        while self._turn_cancels:
            self._turn_cancels -= 1
            task.uncancel()
        return task.cancelling() > 0

    def expire_turn(self) -> None:
        """The turn's wall time is up (``TurnLimits.max_seconds``): cancel it."""
        if self._turn_task is not None:
            self._turn_expired = True
            self._cancel_turn_task()

    def _cancel_turn_task(self) -> None:
        """Cancel the turn in progress (a loop callback or another task: never from
        inside this task's own step, so the cancellation lands inside the turn)."""
        task = self._turn_task
        if task is not None:
            self._turn_cancels += 1
            task.cancel()

    async def _next_user_message(self) -> ChatMessage | None:
        """The next user turn from ``queues.input`` (the event agent's ``tool`` replies,
        recorded there too, are skipped)."""
        while True:
            item = await self.queues.input.get()
            if item is None:
                return None
            message = as_user_message(item)
            if message is not None:
                self.turns_taken += 1
                return message

    def event_services(self) -> EventServices:
        """The executor and the event-agent link, made on the session's first batch
        (a session whose turns only stream answers never makes them)."""
        if self._services is None:
            executor = EventBatchExecutor(
                self.registry,
                clock=self.clock,
                max_parallel=self.request.event_agent.max_parallel_events,
            )
            replies = ReplyChannel(wire=self.queues.input)
            link = EventAgentLink(self.queues.events, replies, self._ensure_event_agent)
            self._services = EventServices(executor, link)
        return self._services

    def _ensure_event_agent(self) -> None:
        """Start the event agent on the first dual batch (sessions without one never pay)."""
        if self._event_agent_task is not None and not self._event_agent_task.done():
            return
        services = self.event_services()
        agent = EventAgent(
            self.client,
            self.registry,
            services.executor,
            clock=self.clock,
            events=self.queues.events,
            replies=services.event_agent.replies,
        )
        self._event_agent_task = asyncio.create_task(agent.serve())

    async def _stop_event_agent(self) -> None:
        task, self._event_agent_task = self._event_agent_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.queues.drop_pending_events()  # requests their turn no longer waits for
        if self._services is not None:
            self._services.event_agent.replies.clear()


def _user_turns(items: list[Any]) -> tuple[str, ...]:
    """The texts of the user turns among input items taken off the queue unread."""
    return tuple(m.content for item in items if (m := as_user_message(item)) is not None)


def _closed_while_opening(exc: BaseException) -> AgentLabError:
    if isinstance(exc, AgentLabError):
        return exc
    return RunCancelled("the runtime was closed before the session opened")
