"""Closing the turns a stopped runtime left running (DESIGN.md §9.7, §10).

A turn's row is closed by the runtime that ran it (``finish_turn``). When that runtime
died mid-turn (the process was killed) the row stays ``running``. The runtime that next
claims the session knows better: it holds the one writer claim (the dead runtime's was
taken over, or none was live), so no turn of that session can still be running. While
it opens the session, in the same store trip, it closes every such row as ``failed``
with the reason ``interrupted`` and the message the turn record uses, so the row, the
usage summary, exports and the record agree.

The interrupted turn's call metrics were never written (a turn writes them when it
ends). Its tool metrics are written now where the store holds the runtime's own figures,
as the live turn would have: a batch the journal has as committed had its
``event_batch_results`` audit (one entry per logical result, with the status and the
measured ``tool_latency_ms``) written in the commit's transaction, so each of its
logical results gets its ``tool_execution`` metric from that audit. A batch cut off by
the interruption gets none (a batch cut off by a cancelled turn gets the metrics its
live runtime measured; this runtime measured nothing): no result
audit was written, and the journal, which knows each call's outcome, does not know how
long its handler ran (the time between its dispatched and landed records also holds
the dispatch write and whatever the loop did before the outcome was written). Its calls
are in the record of the turn that reports them (``recovered_calls``). A chat call whose
stream had ended gets its ``chat`` metric from its ``chat_agent_response`` audit (the
figures the runtime measured); a call still streaming when the process died, and the
event agent's argument calls, get none.

Synchronous: runs in the worker thread (inside the open's transaction when the store
groups writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_lab.application._metrics import tool_metric_key
from agent_lab.application._recovery import Recovery, recovery_from_batches
from agent_lab.application.session_store import (
    INTERRUPTED_MESSAGE,
    INTERRUPTED_REASON,
    CallMetric,
    SessionStore,
)


def recover_interrupted(store: SessionStore, session_id: str) -> Recovery:
    """The effects of interrupted batches the model was not told about, read once the
    session is claimed; the turns a stopped runtime left running are closed meanwhile
    (``close_interrupted_turns``)."""
    batches = store.list_unreported_batches(session_id)
    recovery = recovery_from_batches(batches)
    close_interrupted_turns(store, session_id, batches)
    return recovery


def close_interrupted_turns(
    store: SessionStore, session_id: str, batches: Iterable[Mapping[str, Any]]
) -> list[int]:
    """Close the session's ``running`` turns as interrupted; return their indexes.

    Call only while holding the session's writer claim. ``batches`` are the session's
    ``list_unreported_batches`` rows, read in the same transaction (an interrupted
    turn's batches are all among them: none was reported, since the turn never
    ended); each closed turn gets the ``tool_execution`` metrics of its committed ones.
    """
    running = [
        int(turn["turn_index"])
        for turn in store.list_turns(session_id)
        if turn.get("status") == "running"
    ]
    kept = list(batches)
    for turn_index in running:
        committed = {
            str(batch["scope"]): str(batch["mode"])
            for batch in kept
            if batch.get("turn_index") == turn_index and batch.get("state") == "committed"
        }
        audits = store.list_audit_logs(session_id, turn_index=turn_index)
        metrics = answered_chat_metrics(turn_index, audits)
        metrics += committed_tool_metrics(turn_index, committed, audits) if committed else []
        if metrics:
            store.append_usages(session_id, metrics)
        store.complete_turn(
            session_id,
            turn_index,
            status="failed",
            failure_reason=INTERRUPTED_REASON,
            failure_message=INTERRUPTED_MESSAGE,
        )
    return running


def committed_tool_metrics(
    turn_index: int, committed: Mapping[str, str], audits: Iterable[Mapping[str, Any]]
) -> list[CallMetric]:
    """One ``tool_execution`` metric per logical result of the turn's committed batches
    (``committed``: their mode by scope), from their ``event_batch_results`` audits."""
    metrics: list[CallMetric] = []
    for audit in audits:
        details = audit.get("details") or {}
        mode = committed.get(str(details.get("scope")))
        if audit.get("event") != "event_batch_results" or mode is None:
            continue
        round_index = int(details.get("round_index") or 0)
        metrics += [
            CallMetric(
                metric_key=tool_metric_key(turn_index, round_index, str(result["event_id"])),
                turn_index=turn_index,
                round_index=round_index,
                call_kind="tool_execution",
                agent="tool",
                mode=mode,  # validated by the model (a ToolInvocationMode)
                event_id=str(result["event_id"]),
                event_name=str(result.get("event_name", "")),
                tool_latency_ms=result.get("tool_latency_ms"),
                status=result.get("status"),
            )
            for result in details.get("results") or []
        ]
    return metrics


def answered_chat_metrics(turn_index: int, audits: Iterable[Mapping[str, Any]]) -> list[CallMetric]:
    """One ``chat`` metric per chat call whose stream ended before the runtime did, from
    its ``chat_agent_response`` audit: the figures the runtime measured and audited,
    as the live turn's metric would hold them (tokens only as reported)."""
    metrics: list[CallMetric] = []
    for audit in audits:
        details = audit.get("details") or {}
        call = details.get("call")
        if audit.get("event") != "chat_agent_response" or not isinstance(call, Mapping):
            continue
        usage = call.get("usage") or {}
        metrics.append(
            CallMetric(
                metric_key=str(call["metric_key"]),
                turn_index=turn_index,
                round_index=int(details.get("round_index") or 0),
                call_kind="chat",
                agent="chat_agent",
                mode=details.get("tool_invocation_mode"),  # validated by the model
                model=call.get("model"),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                total_tokens=int(usage.get("total_tokens") or 0),
                cached_tokens=int(usage.get("cached_tokens") or 0),
                usage_reported=call.get("usage") is not None,
                finish_reason=call.get("finish_reason"),
                ttft_ms=call.get("provider_ttft_ms"),
                latency_ms=call.get("latency_ms"),
                status="success",
            )
        )
    return metrics
