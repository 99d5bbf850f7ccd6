"""What the current user turn has already done, read back from the conversation.

A model that acts once per request must not redo an action whose result it already
has. Everything after the last user message belongs to the current turn: the
assistant's ``tool_calls`` (``chat_agent_tools``) and the tool results, whether they
arrive as ``tool`` messages or as ``EventAgent results:`` user messages
(``dual_agent``, where the assistant's event blocks never come back). Each call or
result counts once towards the intent kind its tool does; an intent is pending while
its kind has fewer calls than the message asked for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from agent_lab.infrastructure.simulator.catalog import Offer, OfferedTool, kind_of
from agent_lab.infrastructure.simulator.followup import (
    Outcome,
    already_said,
    outcome_kind,
    outcomes_before,
    outcomes_in,
)
from agent_lab.infrastructure.simulator.intents import Intent, IntentKind
from agent_lab.infrastructure.simulator.request import Message


@dataclass(frozen=True)
class TurnProgress:
    """The calls and results of the current user turn so far."""

    outcomes: list[Outcome] = field(default_factory=list)
    """Every result since the last user message, in conversation order."""
    done: Counter[IntentKind] = field(default_factory=Counter)
    """How many calls of each kind the turn has already made."""
    latest: list[Outcome] = field(default_factory=list)
    """The results the conversation ends with (empty when it ends otherwise)."""
    spoken: list[str] = field(default_factory=list)
    """What the assistant has said in this turn (preambles, tool confirmations)."""
    unattributed: int = 0
    """Results whose tool the simulator cannot tell (a custom tool's payload without a
    ``tool`` name); each stands for the earliest intent still pending."""

    def unreported(self, offer: Offer) -> list[Outcome]:
        """The results the assistant has not already put into words in this turn."""
        return [
            outcome
            for outcome in self.outcomes
            if not any(already_said(outcome, offer, text) for text in self.spoken)
        ]

    def pending(self, intents: list[Intent]) -> list[Intent]:
        """The intents the turn has not acted on yet, in the order they were asked."""
        left = Counter(self.done)
        waiting: list[Intent] = []
        for intent in intents:
            if left[intent.kind] > 0:
                left[intent.kind] -= 1
            else:
                waiting.append(intent)
        return waiting[self.unattributed :]


def turn_progress(messages: list[Message], user_index: int | None, offer: Offer) -> TurnProgress:
    """The progress of the turn that starts after ``messages[user_index]``."""
    start = 0 if user_index is None else user_index + 1
    turn = messages[start:]
    outcomes = outcomes_in(messages, start)
    calls = Counter(
        kind
        for message in turn
        for call in message.tool_calls or []
        if (kind := kind_for(call.function.name, offer)) is not None
    )
    kinds = [outcome_kind(outcome, offer) for outcome in outcomes]
    results = Counter(kind for kind in kinds if kind is not None)
    done = Counter({kind: max(calls[kind], results[kind]) for kind in calls | results})
    spoken = [message.text for message in turn if message.role == "assistant" and message.text]
    latest = outcomes_before(messages, len(messages))
    return TurnProgress(outcomes, done, latest, spoken, kinds.count(None))


def kind_for(name: str, offer: Offer) -> IntentKind | None:
    """The intent kind a tool (named as offered, or as registered) does."""
    return kind_of(offer.named(name) or OfferedTool(name))
