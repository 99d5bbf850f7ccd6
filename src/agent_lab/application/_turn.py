"""The turn engine: chat rounds, tool batches and result policies (DESIGN.md §5–6).

One engine serves ``run()`` and ``start_session()``. A turn is a loop of rounds::

    round = open the round, stream the chat call, then either keep the answer or run
            the round's batch (dual: through the event agent; direct: here), decide the
            policy, commit, and say what the policy says
    repeat while the policy asks the model to follow up
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_lab.application import _outputs, _policies
from agent_lab.application._audit import Auditor
from agent_lab.application._batches import BatchRun, run_direct_batch, run_dual_batch
from agent_lab.application._chat_round import ChatRoundRequest, StreamedRound, stream_round
from agent_lab.application._metrics import argument_metric, chat_metric, tool_metrics
from agent_lab.application._session_state import (
    RoundStep,
    SessionState,
    TurnOutcome,
    TurnState,
)
from agent_lab.application._tasks import finish_even_if_cancelled
from agent_lab.application._transcript import chat_request_messages
from agent_lab.application.events import EventBatchExecutor
from agent_lab.application.ports import ChatClient
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain import errors
from agent_lab.domain.errors import AgentLabError, ModelBehaviorError, PersistenceFailed
from agent_lab.domain.messages import ChatMessage, StreamItemKind

logger = logging.getLogger("agent_lab.application.runtime")


@dataclass
class EngineDeps:
    client: ChatClient
    registry: ToolRegistry
    executor: EventBatchExecutor
    queues: RuntimeQueues
    auditor: Auditor
    ensure_event_agent: Callable[[], None]


class TurnEngine:
    """Runs the user turns of one session."""

    def __init__(self, deps: EngineDeps, session: SessionState) -> None:
        self.deps = deps
        self.session = session
        self.auditor = deps.auditor
        self.clock = deps.auditor.clock

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
        """Run every round of one turn; failures come back as the outcome."""
        try:
            await self._open_turn(turn, user)
            step: RoundStep = "continue"
            while step == "continue":
                step = await self._run_round(turn)
        except PersistenceFailed as exc:
            await self._abandon_open_batch(turn)
            return TurnOutcome("failed", str(exc), exc.failure_reason)
        except AgentLabError as exc:
            await self._abandon_open_batch(turn)
            return TurnOutcome("failed", str(exc), _failure_reason(exc))
        except asyncio.CancelledError:
            await self._abandon_open_batch(turn)
            raise
        except Exception as exc:  # a bug in a client or tool must not kill the session
            logger.warning("turn %s failed unexpectedly: %r", turn.index, exc)
            await self._abandon_open_batch(turn)
            return TurnOutcome("failed", f"turn failed: {exc}", "internal_error")
        return TurnOutcome("terminated" if self.session.terminated else "completed")

    async def _open_turn(self, turn: TurnState, user: ChatMessage) -> None:
        if not self.session.one_shot:
            await self.auditor.emit("turn_started", {"turn_index": turn.index})
            await self.deps.queues.output.put(_outputs.turn_started(turn.index))
        if self.session.recorder is not None:
            await self.session.recorder.start_turn(turn.index, user)
        self.session.history.append(user)

    async def _abandon_open_batch(self, turn: TurnState) -> None:
        batch_id, turn.open_batch = turn.open_batch, None
        if batch_id is not None and self.session.recorder is not None:
            await finish_even_if_cancelled(self.session.recorder.abandon_batch(batch_id))

    async def _run_round(self, turn: TurnState) -> RoundStep:
        turn.round_index += 1
        started = self.clock()
        offered = self._offered_events(turn)
        await self.auditor.emit("chat_round_started", self._round_details(turn, offered))
        request = self._chat_request(turn, offered, started)
        requested_at = await self.auditor.emit(
            "chat_agent_request", self._request_details(turn, request)
        )
        streamed = await stream_round(self.deps.client, self.auditor, request, requested_at)
        answered_at = await self.auditor.emit(
            "chat_agent_response", self._response_details(turn, streamed)
        )
        streamed.call.latency_ms = _outputs.elapsed_ms(requested_at, answered_at)
        if streamed.duplicate_call_id is not None:
            raise ModelBehaviorError(
                f"duplicate provider tool-call ID: {streamed.duplicate_call_id}"
            )
        if streamed.events:
            turn.budget -= 1
            step = await self._run_batch(turn, streamed)
        else:
            await self._keep_answer(turn, streamed)
            step = "finish"
        await self._finish_round(turn, streamed, started)
        return step

    async def _finish_round(self, turn: TurnState, streamed: StreamedRound, started: float) -> None:
        ended = self.clock()
        await self.deps.queues.output.put(
            _outputs.round_stats(
                turn.round_index,
                streamed.ttft_ms,
                _outputs.elapsed_ms(started, ended),
                streamed.call.usage,
                bool(streamed.events),
            )
        )
        await self.auditor.emit(
            "chat_round_finished",
            {"round_index": turn.round_index, "turn_index": turn.index},
        )
        if self.session.recorder is not None:
            turn.metrics.append(
                chat_metric(
                    streamed.call,
                    turn_index=turn.index,
                    round_index=turn.round_index,
                    mode=self.session.mode,
                )
            )

    async def _keep_answer(self, turn: TurnState, streamed: StreamedRound) -> None:
        content = streamed.content
        if not content.strip():
            return
        answer = ChatMessage(role="assistant", content=content)
        self.session.history.append(answer)
        if self.session.recorder is not None:
            await self.session.recorder.append_messages(turn.index, [answer])

    async def _run_batch(self, turn: TurnState, streamed: StreamedRound) -> RoundStep:
        scope = f"{self.session.scope_prefix}:turn-{turn.index}:round-{turn.round_index}"
        runner = run_dual_batch if self.session.mode == "dual_agent" else run_direct_batch
        batch = await runner(self, turn, streamed, scope)
        result = batch.result
        await self.auditor.emit(
            "event_batch_results",
            {
                "scope": scope,
                "round_index": turn.round_index,
                "results": [entry.audit_entry() for entry in result.logical_results],
            },
        )
        decision = _policies.decide(
            result, chat_spoke=bool(streamed.content.strip()), registry=self.deps.registry
        )
        await self.auditor.emit(
            "event_policy_decision",
            {"scope": scope, "round_index": turn.round_index, **decision.audit_details()},
        )
        if decision.terminate:
            self.session.terminated = True
            await self.auditor.emit(
                "terminal_completed",
                {"scope": scope, "event_ids": list(decision.terminal_event_ids)},
            )
        await self._commit_batch(turn, batch, decision)
        self.deps.executor.release_scope(scope)
        self._note_batch_metrics(turn, batch)
        return self._next_step(decision)

    async def _commit_batch(
        self, turn: TurnState, batch: BatchRun, decision: _policies.PolicyDecision
    ) -> None:
        spoken = [*decision.confirmations]
        if decision.farewell:
            spoken.append(decision.farewell)
        closing = [ChatMessage(role="assistant", content=" ".join(spoken))] if spoken else []
        follow_ups = self._take_buffered_user_input() if self.session.one_shot else []
        if self.session.recorder is not None and turn.open_batch is not None:
            await self.session.recorder.commit_batch(
                turn.open_batch, [*batch.persisted, *closing, *follow_ups]
            )
        turn.open_batch = None
        self.session.history.extend([*batch.transcript, *closing, *follow_ups])
        for text in spoken:
            await self.deps.queues.output.put(_outputs.message_delta(text))

    def _take_buffered_user_input(self) -> list[ChatMessage]:
        taken: list[ChatMessage] = []
        queue = self.deps.queues.input
        while not queue.empty():
            self.session.buffered.append(queue.get_nowait())
        while self.session.buffered:
            item = self.session.buffered.popleft()
            message = as_user_message(item)
            if message is not None:
                taken.append(message)
        return taken

    def _next_step(self, decision: _policies.PolicyDecision) -> RoundStep:
        if decision.terminate:
            return "terminate"
        if decision.llm_follow_up:
            return "continue"
        last = self.session.history[-1] if len(self.session.history) else None
        if self.session.one_shot and last is not None and last.role == "user":
            return "continue"  # the user spoke while the tools ran
        return "finish"

    def _note_batch_metrics(self, turn: TurnState, batch: BatchRun) -> None:
        if self.session.recorder is None:
            return
        turn.metrics += tool_metrics(
            batch.result, turn_index=turn.index, round_index=turn.round_index
        )
        turn.metrics += [
            argument_metric(
                call.call,
                fallback=call.fallback,
                event_id=call.event_id,
                event_name=call.event_name,
                turn_index=turn.index,
                round_index=turn.round_index,
                mode=self.session.mode,
            )
            for call in batch.argument_calls
        ]

    def _offered_events(self, turn: TurnState) -> list[str]:
        if turn.budget <= 0:
            return []
        return list(self.session.request.event_agent.enabled_tools)

    def _chat_request(
        self, turn: TurnState, offered: list[str], started: float
    ) -> ChatRoundRequest:
        request = self.session.request
        dual = self.session.mode == "dual_agent"
        catalog = (
            self.deps.registry.chat_event_system_message(offered) if dual and offered else None
        )
        accepted: StreamItemKind | None = None
        if offered:
            accepted = "text_event" if dual else "provider_tool_call"
        sent = chat_request_messages(self.session.prefix, self.session.history, catalog)
        return ChatRoundRequest(
            round_index=turn.round_index,
            messages=sent.messages,
            message_dumps=sent.dumps,
            tools=[] if dual else self.deps.registry.provider_tool_schemas(offered),
            params=request.chat_agent,
            accepted_kind=accepted,
            seen_call_ids=self.session.seen_call_ids,
            started=started,
            measure_provider_ttft=self.session.recorder is not None,
        )

    def _round_details(self, turn: TurnState, offered: list[str]) -> dict[str, Any]:
        dual = self.session.mode == "dual_agent"
        return {
            "turn_index": turn.index,
            "round_index": turn.round_index,
            "tool_invocation_mode": self.session.mode,
            "events_enabled": offered,
            "configured_events": list(self.session.request.event_agent.enabled_tools),
            "event_generation_enabled": bool(offered),
            "event_prompt_events": offered if dual else [],
            "event_budget_remaining": max(turn.budget, 0),
        }

    def _request_details(self, turn: TurnState, request: ChatRoundRequest) -> dict[str, Any]:
        return {
            "agent": "chat_agent",
            "turn_index": turn.index,
            "round_index": turn.round_index,
            "tool_invocation_mode": self.session.mode,
            "params": request.params.model_dump(mode="json"),
            "tools": request.tools,
            "messages": request.message_dumps,
        }

    def _response_details(self, turn: TurnState, streamed: StreamedRound) -> dict[str, Any]:
        usage = streamed.call.usage
        return {
            "agent": "chat_agent",
            "turn_index": turn.index,
            "round_index": turn.round_index,
            "tool_invocation_mode": self.session.mode,
            "content": streamed.content,
            "event_names": [event.name for event in streamed.events],
            "event_ids": [event.id for event in streamed.events],
            "raw_chunks": streamed.call.raw_chunks,
            "raw_chunk_offsets_ms": streamed.call.chunk_offsets_ms,
            "usage": usage.model_dump() if usage is not None else None,
            "usage_reported": usage is not None,
            "visible_ttft_ms": streamed.ttft_ms,
            "provider_ttft_ms": streamed.call.ttft_ms,
        }


def as_user_message(item: Any) -> ChatMessage | None:
    """A user turn from an input item (a ``ChatMessage`` or plain text), else ``None``."""
    if isinstance(item, str):
        return ChatMessage(role="user", content=item)
    if isinstance(item, ChatMessage) and item.role == "user" and item.name != "event_agent":
        return item
    return None


def _failure_reason(exc: AgentLabError) -> str:
    if isinstance(exc, errors.ProviderHTTPError):
        return f"provider_error:http_{exc.status}"
    if isinstance(exc, errors.ProviderConnectionError):
        return "provider_error:unreachable"
    if isinstance(exc, errors.ProviderTimeout):
        return "provider_error:timeout"
    if isinstance(exc, errors.ProviderError):
        return "provider_error:protocol"
    if isinstance(exc, errors.ModelBehaviorError):
        return "protocol_error"
    if isinstance(exc, errors.StoreError):
        return "session_persistence_failed:unknown"
    return "run_error"
