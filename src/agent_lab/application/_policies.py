"""Result policies: what a finished batch means for the rest of the turn (DESIGN.md §6).

``decide`` reads a batch's results; ``next_step`` turns that decision into the turn's
next move, a ``NextStep``: run another round (and why), finish the turn, or terminate
the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from agent_lab.application.events import EventBatchResult, EventResult, ResultPolicy
from agent_lab.application.tools import ToolRegistry

RunAgainReason = Literal["user_spoke", "follow_up", "corrective"]


@dataclass(frozen=True)
class RunAgain:
    """Another chat round follows in this turn."""

    reason: RunAgainReason
    """``follow_up``: results go back to the model; ``corrective``: a silent or template
    tool failed; ``user_spoke``: the user spoke while the tools ran (one-shot runs)."""


@dataclass(frozen=True)
class Finish:
    """The turn is complete."""


@dataclass(frozen=True)
class Terminate:
    """A terminal tool ended the turn and the session."""

    event_ids: tuple[str, ...]


NextStep: TypeAlias = RunAgain | Finish | Terminate


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
    corrective: bool = False
    """The follow-up is only there because a silent or template tool failed."""

    def audit_details(self) -> dict[str, object]:
        return {"terminate": self.terminate, "llm_follow_up": self.llm_follow_up}

    @property
    def spoken(self) -> list[str]:
        """What the runtime says itself after the batch: confirmations, then a farewell."""
        return [*self.confirmations, *([self.farewell] if self.farewell else [])]


def wants_follow_up(result: EventResult) -> bool:
    """FOLLOW_UP results always go back to the model; other policies only on failure."""
    return result.policy is ResultPolicy.FOLLOW_UP or not result.succeeded


def decide(batch: EventBatchResult, *, chat_spoke: bool, registry: ToolRegistry) -> PolicyDecision:
    logical = batch.logical_results
    confirmations = _confirmations(logical)
    terminal = [r for r in logical if r.policy is ResultPolicy.TERMINATE and r.succeeded]
    if terminal:
        return PolicyDecision(
            terminate=True,
            llm_follow_up=False,
            confirmations=confirmations,
            farewell=None if chat_spoke else _farewell(terminal[0], registry),
            terminal_event_ids=tuple(r.event_id for r in terminal),
        )
    follow_ups = [r for r in logical if wants_follow_up(r)]
    return PolicyDecision(
        terminate=False,
        llm_follow_up=bool(follow_ups),
        confirmations=confirmations,
        corrective=_only_corrections(follow_ups),
    )


def _confirmations(results: tuple[EventResult, ...]) -> tuple[str, ...]:
    """The sentences of successful TEMPLATE tools, in call order."""
    return tuple(
        r.confirmation
        for r in results
        if r.policy is ResultPolicy.TEMPLATE and r.succeeded and r.confirmation
    )


def _only_corrections(follow_ups: list[EventResult]) -> bool:
    """True when every result asking for a round is a failed non-FOLLOW_UP tool."""
    return bool(follow_ups) and all(r.policy is not ResultPolicy.FOLLOW_UP for r in follow_ups)


def next_step(decision: PolicyDecision, *, user_spoke: bool) -> NextStep:
    """The turn's next move after a batch; ``user_spoke``: input arrived during the tools."""
    if decision.terminate:
        return Terminate(decision.terminal_event_ids)
    if decision.llm_follow_up:
        return RunAgain("corrective" if decision.corrective else "follow_up")
    if user_spoke:
        return RunAgain("user_spoke")
    return Finish()


def _farewell(result: EventResult, registry: ToolRegistry) -> str:
    tool = registry.get(result.event_name)
    return (tool.farewell if tool and tool.farewell else None) or "Goodbye."
