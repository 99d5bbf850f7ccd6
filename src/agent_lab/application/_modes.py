"""The two ways of calling tools, as strategies (DESIGN.md §1, §5, §8).

A ``ToolMode`` owns everything that differs between ``dual_agent`` and
``chat_agent_tools``: what a round offers the model (the event catalog, or provider
tool schemas), which stream item kind it accepts as an event, how a batch runs, and
how a persisted transcript is restored. The turn engine asks the session's mode and
never branches on the mode's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from agent_lab.application._batches import BatchRun, RoundContext, run_direct_batch, run_dual_batch
from agent_lab.application._chat_round import ChatRound, Offer
from agent_lab.application._recovery import Recovery, direct_note, dual_note
from agent_lab.application._restore import read_stored_history
from agent_lab.application._transcript import repair_tool_transcript, visible_history
from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.messages import ChatMessage, StreamItemKind


@dataclass(frozen=True)
class ToolMode:
    """One way of calling tools: what it offers, accepts, runs and restores."""

    name: ToolInvocationMode
    accepts: StreamItemKind
    """The stream item kind this mode takes as an event."""
    offers: Callable[[ToolRegistry, list[str], StreamItemKind], Offer]
    run_batch: Callable[[RoundContext, ChatRound], Awaitable[BatchRun]]
    restore: Callable[[list[ChatMessage]], list[ChatMessage]]
    """The persisted history as this mode may send it again (DESIGN.md §8)."""
    recovery_note: Callable[[Recovery], ChatMessage]
    """The labelled note that gives interrupted batches' effects back (§9.4)."""
    keeps_recovery_note: bool
    """The note is stored with the turn, so every later request (live or restored)
    carries it; otherwise only the live history keeps it, as only the visible history
    is restored (§8)."""

    def offer(self, registry: ToolRegistry, names: list[str]) -> Offer:
        """What a round offers the model when ``names`` are on offer (maybe none)."""
        return self.offers(registry, names, self.accepts)


NO_EVENTS: Final = Offer(events=[], accepts=None)
"""The offer of a dual-mode round with no events on offer, shared by every session
(an ``Offer`` is frozen and its readers never change its lists)."""


def _dual_offer(registry: ToolRegistry, names: list[str], accepts: StreamItemKind) -> Offer:
    """The event catalog in a system message; no offer at all without tools."""
    if not names:
        return NO_EVENTS
    return Offer(
        events=names,
        accepts=accepts,
        catalog=registry.chat_event_system_message(names),
        offered_names_only=True,
    )


def _direct_offer(registry: ToolRegistry, names: list[str], accepts: StreamItemKind) -> Offer:
    """The provider tool schemas (an empty list without tools)."""
    return Offer(
        events=names,
        accepts=accepts if names else None,
        tools=registry.provider_tool_schemas(names),
        unique_call_ids=True,
    )


DUAL_MODE = ToolMode(
    "dual_agent", "text_event", _dual_offer, run_dual_batch, visible_history, dual_note, False
)
"""Inline event blocks; a separate event agent fills in arguments and runs tools."""

DIRECT_MODE = ToolMode(
    "chat_agent_tools",
    "provider_tool_call",
    _direct_offer,
    run_direct_batch,
    repair_tool_transcript,
    direct_note,
    True,
)
"""Provider function calling; the runtime runs the calls and replies in order."""

_MODES: dict[ToolInvocationMode, ToolMode] = {mode.name: mode for mode in (DUAL_MODE, DIRECT_MODE)}


def mode_for(name: ToolInvocationMode) -> ToolMode:
    return _MODES[name]


def restore_history(
    records: Iterable[dict[str, Any]], mode: ToolInvocationMode
) -> list[ChatMessage]:
    """The persisted history as the provider may see it in ``mode`` (DESIGN.md §8).

    Raises:
        InvalidStoredRow: a stored row no repair rule applies to.
    """
    return mode_for(mode).restore(read_stored_history(records).messages)
