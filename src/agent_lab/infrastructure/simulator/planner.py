"""Decides what the simulated model answers to one request (pure, seeded).

The decision, in order: a forced ``tool_choice`` gets only that call; once the current
user turn has results, the intents it has not acted on yet are acted on, and when none
is left the turn gets a grounded summary of its results (so each requested action runs
once per user turn); otherwise the intents of the last user message become tool calls
(tools mode) or one inline event block (events mode), and a message without intents
gets a plain answer.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import orjson

from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START
from agent_lab.infrastructure.simulator.catalog import (
    Offer,
    OfferedTool,
    fit_arguments,
    kind_of,
    offer_from,
)
from agent_lab.infrastructure.simulator.followup import outcomes_before, summarize
from agent_lab.infrastructure.simulator.intents import Intent, arguments_for, detect_intents
from agent_lab.infrastructure.simulator.phrasing import cannot, plain_answer, preamble
from agent_lab.infrastructure.simulator.progress import TurnProgress, turn_progress
from agent_lab.infrastructure.simulator.request import ChatRequest, Message

FinishReason = Literal["stop", "tool_calls", "length"]


@dataclass(frozen=True)
class PlannedCall:
    """One tool call of the reply; ``arguments`` is the JSON text to stream."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """What the simulated model answers, before it is cut into chunks."""

    content: str
    tool_calls: tuple[PlannedCall, ...] = ()
    finish_reason: FinishReason = "stop"


@dataclass(frozen=True)
class PlanContext:
    """Everything a plan may depend on besides the request itself."""

    now: datetime
    digest: str
    """Hex digest of the seed and the request body; ids derive from it."""
    rng: random.Random

    def call_id(self, index: int) -> str:
        return "call_" + hashlib.sha256(f"{self.digest}:{index}".encode()).hexdigest()[:24]


def plan_reply(request: ChatRequest, context: PlanContext) -> Reply:
    """The reply to ``request``; see the module docstring for the order of decisions."""
    offer = offer_from(request)
    if request.forced_name is not None:
        return _forced_reply(request, offer, context)
    index = last_user_index(request.messages)
    progress = turn_progress(request.messages, index, offer)
    if progress.outcomes:
        message = request.messages[index].text if index is not None else ""
        return _continued_reply(message, progress, offer, context)
    return _intent_reply(request, offer, context)


def last_user_index(messages: list[Message]) -> int | None:
    """Index of the last user message that is not an event-agent results message."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user" and not messages[index].is_results:
            return index
    return None


def _last_user_text(messages: list[Message]) -> str:
    index = last_user_index(messages)
    return messages[index].text if index is not None else ""


def _forced_reply(request: ChatRequest, offer: Offer, context: PlanContext) -> Reply:
    name = request.forced_name or ""
    tool = offer.named(name) or OfferedTool(name)
    call = _call_for(tool, _last_user_text(request.messages), context, 0)
    return Reply("", (call,), "tool_calls")


def _call_for(tool: OfferedTool, message: str, context: PlanContext, index: int) -> PlannedCall:
    kind = kind_of(tool)
    arguments = arguments_for(kind, message, context.now) if kind else {}
    return _call(tool, arguments, message, context, index)


def _call(
    tool: OfferedTool, arguments: dict[str, Any], message: str, context: PlanContext, index: int
) -> PlannedCall:
    fitted = fit_arguments(arguments, tool.parameters, message)
    return PlannedCall(context.call_id(index), tool.name, orjson.dumps(fitted).decode())


def _intent_reply(request: ChatRequest, offer: Offer, context: PlanContext) -> Reply:
    index = last_user_index(request.messages)
    message = request.messages[index].text if index is not None else ""
    earlier = outcomes_before(request.messages, index) if index is not None else []
    lead = summarize(earlier, offer) if earlier else ""
    intents = detect_intents(message, context.now)
    matched = [(intent, offer.find(intent.kind)) for intent in intents]
    if not any(tool for _, tool in matched):
        if request.tool_choice == "required" and offer.mode == "tools" and offer.tools:
            call = _call_for(offer.tools[0], message, context, 0)
            return Reply(lead, (call,), "tool_calls")
        spoken = [cannot(intent.kind) for intent in intents] or [plain_answer(message, context.rng)]
        return Reply(_join(lead, *spoken))
    return _acting_reply(matched, offer, message, lead, context)


def _continued_reply(
    message: str, progress: TurnProgress, offer: Offer, context: PlanContext
) -> Reply:
    """After results of this turn: act on what is still pending, else sum up the turn."""
    pending = progress.pending(detect_intents(message, context.now))
    acting: list[tuple[Intent, OfferedTool | None]] = [
        (intent, tool) for intent in pending if (tool := offer.find(intent.kind)) is not None
    ]
    if acting:
        lead = summarize(progress.latest, offer) if progress.latest else ""
        return _acting_reply(acting, offer, message, lead, context)
    return Reply(summarize(progress.unreported(offer), offer))


def _acting_reply(
    matched: list[tuple[Intent, OfferedTool | None]],
    offer: Offer,
    message: str,
    lead: str,
    context: PlanContext,
) -> Reply:
    spoken = [
        preamble(intent, context.rng) if tool else cannot(intent.kind) for intent, tool in matched
    ]
    text = _join(lead, *spoken)
    acting = [(intent, tool) for intent, tool in matched if tool is not None]
    if offer.mode == "events":
        names = ", ".join(tool.name for _, tool in acting)
        return Reply(f"{text} {EVENT_BLOCK_START}{names}{EVENT_BLOCK_END}")
    calls = tuple(
        _call(tool, intent.arguments, message, context, index)
        for index, (intent, tool) in enumerate(acting)
    )
    return Reply(text, calls, "tool_calls")


def _join(*sentences: str) -> str:
    return " ".join(sentence for sentence in sentences if sentence)
