"""Building a turn record from its audits, one audit at a time (pure, no I/O).

``TurnRecordBuilder.add(event, details)`` takes the audits of one turn in the order
they were emitted: live, from the ``audit`` outputs as they arrive; reopened, from the
store's audit rows. The same audits give the same record, field for field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast, get_args

from agent_lab.application.pricing import PriceTable
from agent_lab.application.record._call_figures import break_off_call, finish_call
from agent_lab.application.record._closing import close_turn, tool_failure_reason
from agent_lab.application.record._costs import priced
from agent_lab.application.record._turn_audits import belongs_to_turn, recovered_call
from agent_lab.application.record.model import (
    CappedResult,
    CutOff,
    EventRecord,
    FailureRecord,
    ModelCallRecord,
    RecordEntry,
    RequestRef,
    RoundRecord,
    ToolExecutionRecord,
    TurnRecord,
)

Details = Mapping[str, Any]

_CUT_OFF_REASONS = frozenset(get_args(CutOff))
_TOOL_STATUS = {"success": "succeeded", "failed": "failed", "cancelled": "cancelled"}


class TurnRecordBuilder:
    """Folds one turn's audits into its ``TurnRecord``."""

    def __init__(
        self, turn_index: int, *, session_id: str | None = None, prices: PriceTable | None = None
    ) -> None:
        self._record = TurnRecord(session_id=session_id, turn_index=turn_index)
        self._prices = prices
        self._calls: dict[str, ModelCallRecord] = {}
        self._events: dict[tuple[int, str], EventRecord] = {}
        self._tools: dict[tuple[int, str], ToolExecutionRecord] = {}
        self._rounds: dict[int, RoundRecord] = {}
        self._argument_requests: dict[str, RequestRef] = {}
        self._handlers: dict[str, Callable[[int, int | None, Details], None]] = {
            "turn_started": self._turn_started,
            "chat_round_started": self._round_started,
            "chat_agent_request": self._chat_request,
            "chat_event_detected": self._event_detected,
            "chat_agent_response": self._chat_response,
            "event_batch_started": self._batch_started,
            "event_agent_request": self._argument_request,
            "event_agent_response": self._resolutions,
            "event_batch_results": self._batch_results,
            "event_policy_decision": self._decision,
            "chat_round_finished": self._round_finished,
            "turn_completed": self._closed,
            "session_finished": self._closed,
        }

    @property
    def closed(self) -> bool:
        return self._record.status != "running"

    def add(self, event: str, details: Details) -> None:
        """Append one audit of this turn (session-level audits are left out)."""
        if not belongs_to_turn(event, details):
            return
        record = self._record
        seq = len(record.entries) + 1
        at = details.get("turn_elapsed_ms")
        record.entries.append(RecordEntry(seq=seq, event=event, at_ms=at))
        handler = self._handlers.get(event)
        if handler is not None:
            handler(seq, at, details)

    def recovered(self, calls: Sequence[Details], seq: int | None = None) -> None:
        """Calls of interrupted batches this turn reported to the model: the
        ``recovered_calls`` of its ``turn_started`` audit (``seq``) or of the
        ``session_started`` audit of the restore before it (no ``seq``)."""
        self._record.recovered_calls += [recovered_call(call, seq) for call in calls]

    def know_user_message(self, text: str | None) -> None:
        """The turn's user message from its stored row, when no request audit had it."""
        if self._record.user_message is None:
            self._record.user_message = text

    def close(self, status: str, reason: str | None, message: str | None) -> None:
        """Close a turn whose closing audit is missing (e.g. from its stored row)."""
        if not self.closed:
            close_turn(self._record, status, reason, message, seq=len(self._record.entries))

    def build(self) -> TurnRecord:
        """The record so far (a copy; the builder keeps growing)."""
        record = self._record.model_copy(deep=True)
        record.cost = priced(record.model_calls, self._prices)
        return record

    # rounds and chat calls

    def _round(self, round_index: int, seq: int) -> RoundRecord:
        found = self._rounds.get(round_index)
        if found is None:
            found = RoundRecord(seq=seq, round_index=round_index)
            self._rounds[round_index] = found
            self._record.rounds.append(found)
            self._record.round_count = max(self._record.round_count, round_index)
        return found

    def _turn_started(self, seq: int, at: int | None, d: Details) -> None:
        self.recovered(d.get("recovered_calls") or [], seq)

    def _round_started(self, seq: int, at: int | None, d: Details) -> None:
        self._record.mode = d.get("tool_invocation_mode", self._record.mode)
        self._round(d["round_index"], seq).offered_events = list(d.get("events_enabled", []))

    def _chat_request(self, seq: int, at: int | None, d: Details) -> None:
        round_index = d["round_index"]
        messages = d.get("messages") or []
        key = f"chat:{self._record.turn_index}:{round_index}"
        call = ModelCallRecord(
            seq=seq,
            metric_key=key,
            role="chat" if round_index == 1 else "follow_up",
            round_index=round_index,
            model=(d.get("params") or {}).get("model"),
            request=RequestRef(
                audit="chat_agent_request",
                audit_seq=seq,
                message_count=len(messages),
                tool_count=len(d.get("tools") or []),
            ),
            started_ms=at,
        )
        self._add_call(call)
        self._round(round_index, seq).model_call = key
        if round_index == 1:
            self._record.user_message = _user_message(messages) or self._record.user_message

    def _add_call(self, call: ModelCallRecord) -> None:
        self._calls[call.metric_key] = call
        self._record.model_calls.append(call)

    def _chat_response(self, seq: int, at: int | None, d: Details) -> None:
        round_index = d["round_index"]
        call = self._calls.get(f"chat:{self._record.turn_index}:{round_index}")
        if call is not None:
            finish_call(call, d.get("call") or {}, at, visible_ttft_ms=d.get("visible_ttft_ms"))
            if call.timings.provider_first_chunk_ms is None:
                call.timings.provider_first_chunk_ms = d.get("provider_ttft_ms")
        found = self._round(round_index, seq)
        found.cut_off = _cut_off(call.finish_reason if call is not None else None)
        found.text = d.get("content", "")
        found.event_ids = list(d.get("event_ids", []))
        found.ignored_event_names = list(d.get("ignored_event_names", []))

    def _round_finished(self, seq: int, at: int | None, d: Details) -> None:
        found = self._round(d["round_index"], seq)
        found.status = "succeeded"
        found.elapsed_ms = d.get("elapsed_ms")
        found.visible_ttft_ms = d.get("visible_ttft_ms")

    # events, their arguments and their tools

    def _event_detected(self, seq: int, at: int | None, d: Details) -> None:
        event, round_index = d["event"], d["round_index"]
        direct = d.get("source") == "provider_tool_call"
        record = EventRecord(
            seq=seq,
            event_id=event["id"],
            event_name=event["name"],
            round_index=round_index,
            source=d.get("source"),
            arguments=dict(event.get("arguments") or {}) if direct else None,
            resolved_by="model" if direct else None,
        )
        self._events[(round_index, record.event_id)] = record
        self._record.events.append(record)

    def _batch_started(self, seq: int, at: int | None, d: Details) -> None:
        round_index, scope = d["round_index"], d["scope"]
        self._round(round_index, seq).batch_scope = scope
        for event_id, name in zip(d.get("event_ids", []), d.get("event_names", []), strict=False):
            event = self._events.get((round_index, event_id))
            tool = ToolExecutionRecord(
                seq=seq,
                metric_key=f"tool:{self._record.turn_index}:{round_index}:{event_id}",
                event_id=event_id,
                event_name=name,
                round_index=round_index,
                scope=scope,
                arguments=dict(event.arguments) if event and event.arguments is not None else None,
            )
            self._tools[(round_index, event_id)] = tool
            self._record.tool_executions.append(tool)

    def _argument_request(self, seq: int, at: int | None, d: Details) -> None:
        self._argument_requests[d["scope"]] = RequestRef(
            audit="event_agent_request",
            audit_seq=seq,
            message_count=len(d.get("history") or []) + 1,  # the event agent's system prompt
            tool_count=1,
        )

    def _resolutions(self, seq: int, at: int | None, d: Details) -> None:
        round_index = _round_of_scope(d["scope"])
        failures = [dict(f) for f in d.get("argument_failures", [])]
        for entry in d.get("resolutions", []):
            event = self._events.get((round_index, entry["event_id"]))
            if event is None:
                continue
            event.arguments = dict(entry.get("arguments") or {})
            event.resolved_by = entry.get("resolved_by")
            event.resolver = entry.get("resolver")
            event.argument_failures = [f for f in failures if f["event_id"] == event.event_id]
            tool = self._tools.get((round_index, event.event_id))
            if tool is not None:
                tool.arguments = dict(event.arguments)
            if entry.get("call"):
                self._argument_call(seq, at, d["scope"], event, entry["call"])
        for failure in failures:
            self._record.failures.append(
                FailureRecord(
                    seq=seq,
                    reason=f"argument_{failure['stage']}_failed",
                    message=failure["cause"],
                    where="argument",
                    ref=failure["event_id"],
                )
            )

    def _argument_call(
        self, seq: int, at: int | None, scope: str, event: EventRecord, figures: Details
    ) -> None:
        key = figures["metric_key"]
        event.argument_call = key
        fallback = event.resolved_by == "argument_fallback"
        call = ModelCallRecord(
            seq=seq,
            metric_key=key,
            role="argument_fallback" if fallback else "argument_generation",
            round_index=event.round_index,
            event_id=event.event_id,
            model=figures.get("model"),
            request=self._argument_requests.get(scope),
        )
        request = call.request
        start = self._record.entries[request.audit_seq - 1].at_ms if request else None
        call.started_ms = start
        finish_call(call, figures, None)
        latency = call.timings.latency_ms
        call.ended_ms = start + latency if start is not None and latency is not None else None
        if figures.get("open"):  # still streaming when the turn ended: its close says how
            call.status = "running"
        if any(f["stage"] == "generation" for f in event.argument_failures):
            call.status = "failed"
            call.failure_reason = "argument_generation_failed"
        self._add_call(call)

    def _batch_results(self, seq: int, at: int | None, d: Details) -> None:
        round_index = d["round_index"]
        for entry in d.get("results", []):
            tool = self._tools.get((round_index, entry["event_id"]))
            if tool is None:
                continue
            _apply_result(tool, entry)
            if entry.get("arguments") is not None:
                tool.arguments = dict(entry["arguments"])
            tool.latency_ms = entry.get("tool_latency_ms")
            tool.policy = entry.get("policy")
            tool.coalesced_ids = list(entry.get("coalesced_ids", []))
            for duplicate_id in tool.coalesced_ids:
                duplicate = self._tools.get((round_index, duplicate_id))
                if duplicate is not None:
                    duplicate.status = tool.status
                    duplicate.deduplicated_from = tool.event_id
            if tool.status != "succeeded":
                self._tool_failure(seq, tool)

    def _tool_failure(self, seq: int, tool: ToolExecutionRecord) -> None:
        reason, message = tool_failure_reason(tool.status, tool.result)
        tool.failure_reason = reason
        self._record.failures.append(
            FailureRecord(
                seq=seq, reason=reason, message=message, where="tool", ref=tool.metric_key
            )
        )

    def _decision(self, seq: int, at: int | None, d: Details) -> None:
        found = self._round(d["round_index"], seq)
        found.decision = {
            "terminate": bool(d.get("terminate")),
            "llm_follow_up": bool(d.get("llm_follow_up")),
        }
        found.spoken = list(d.get("spoken", []))

    # the end of the turn

    def _closed(self, seq: int, at: int | None, d: Details) -> None:
        record = self._record
        record.wall_time_ms = at
        cut_short = d.get("cut_short_answer")
        if cut_short is not None:  # the user saw this much of an answer that never ended
            self._round(cut_short["round_index"], seq).text = cut_short["content"]
        unfinished = d.get("unfinished_call")
        if unfinished is not None:  # what was measured of the call the turn ended in
            self._unfinished_call(seq, unfinished)
        resolutions = d.get("unfinished_resolutions")
        if resolutions is not None:  # the argument calls of the batch it ended in
            self._resolutions(seq, at, resolutions)
        for entry in d.get("unfinished_results", []):
            tool = next(
                (
                    t
                    for t in reversed(record.tool_executions)
                    if t.event_id == entry["event_id"] and t.status == "running"
                ),
                None,
            )
            if tool is not None:
                _apply_result(tool, entry)
                tool.latency_ms = entry.get("tool_latency_ms")
                if tool.status != "succeeded":
                    self._tool_failure(seq, tool)
        close_turn(record, d["status"], d.get("failure_reason"), d.get("failure_message"), seq=seq)

    def _unfinished_call(self, seq: int, d: Details) -> None:
        figures, ttft = d.get("call") or {}, d.get("visible_ttft_ms")
        call = self._calls.get(figures.get("metric_key", ""))
        if call is not None and call.status == "running":
            break_off_call(call, figures, visible_ttft_ms=ttft)
        self._round(d["round_index"], seq).visible_ttft_ms = ttft


def _apply_result(tool: ToolExecutionRecord, entry: Details) -> None:
    status = entry.get("status", "failed")
    tool.status = _TOOL_STATUS.get(status, status)  # type: ignore[assignment]
    tool.result = entry.get("result")
    capped = entry.get("result_capped")
    tool.result_capped = CappedResult.model_validate(capped) if capped else None


def _cut_off(finish_reason: str | None) -> CutOff | None:
    """The finish reason when it says the answer was cut off."""
    return cast(CutOff, finish_reason) if finish_reason in _CUT_OFF_REASONS else None


def _user_message(messages: Sequence[Details]) -> str | None:
    """The user's message of a turn's first request: its last user message that is
    not the event agent's results (a recovery note may follow the user's message)."""
    for message in reversed(messages):
        if message.get("role") == "user" and not message.get("name"):
            content = message.get("content")
            return content if isinstance(content, str) else None
    return None


def _round_of_scope(scope: str) -> int:
    """``…:round-<n>`` → ``n`` (DESIGN.md §6)."""
    return int(scope.rpartition(":round-")[2])
