"""Result policies: what a finished batch means for the rest of the turn (DESIGN.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

from agent_lab.application.events import EventBatchResult, EventResult, ResultPolicy
from agent_lab.application.tools import ToolRegistry


@dataclass(frozen=True)
class PolicyDecision:
    """The decision after one batch, in the words of the ``event_policy_decision`` audit."""

    terminate: bool
    llm_follow_up: bool
    confirmations: tuple[str, ...] = ()
    """TEMPLATE successes' sentences, emitted without a model call."""
    farewell: str | None = None
    """Said when the batch terminates and the chat agent said nothing in the round."""
    terminal_event_ids: tuple[str, ...] = ()

    def audit_details(self) -> dict[str, object]:
        return {"terminate": self.terminate, "llm_follow_up": self.llm_follow_up}


def wants_follow_up(result: EventResult) -> bool:
    """FOLLOW_UP results always go back to the model; other policies only on failure."""
    return result.policy is ResultPolicy.FOLLOW_UP or not result.succeeded


def decide(batch: EventBatchResult, *, chat_spoke: bool, registry: ToolRegistry) -> PolicyDecision:
    logical = batch.logical_results
    terminal = [r for r in logical if r.policy is ResultPolicy.TERMINATE and r.succeeded]
    confirmations = tuple(
        r.confirmation
        for r in logical
        if r.policy is ResultPolicy.TEMPLATE and r.succeeded and r.confirmation
    )
    if terminal:
        return PolicyDecision(
            terminate=True,
            llm_follow_up=False,
            confirmations=confirmations,
            farewell=None if chat_spoke else _farewell(terminal[0], registry),
            terminal_event_ids=tuple(r.event_id for r in terminal),
        )
    return PolicyDecision(
        terminate=False,
        llm_follow_up=any(wants_follow_up(r) for r in logical),
        confirmations=confirmations,
    )


def _farewell(result: EventResult, registry: ToolRegistry) -> str:
    tool = registry.get(result.event_name)
    return (tool.farewell if tool and tool.farewell else None) or "Goodbye."
