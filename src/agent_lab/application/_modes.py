"""The two ways of calling tools, as strategies (DESIGN.md §1, §5, §8).

A ``ToolMode`` owns everything that differs between ``dual_agent`` and
``chat_agent_tools``: what a round offers the model (the event catalog, or provider
tool schemas), which stream item kind it accepts as an event, how a batch runs, and
how a persisted transcript is restored. The turn engine asks the session's mode and
never branches on the mode's name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Protocol

from agent_lab.application._batches import BatchRun, RoundContext, run_direct_batch, run_dual_batch
from agent_lab.application._chat_round import Offer, StreamedRound
from agent_lab.application._recovery import Recovery, direct_note, dual_note
from agent_lab.application._restore import read_stored_history
from agent_lab.application._transcript import repair_tool_transcript, visible_history
from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.messages import ChatMessage, StreamItemKind


class ToolMode(Protocol):
    """One way of calling tools."""

    @property
    def name(self) -> ToolInvocationMode: ...

    @property
    def accepts(self) -> StreamItemKind:
        """The stream item kind this mode takes as an event."""
        ...

    def offer(self, registry: ToolRegistry, names: list[str]) -> Offer:
        """What a round offers the model when ``names`` are on offer (maybe none)."""
        ...

    async def run_batch(self, ctx: RoundContext, streamed: StreamedRound) -> BatchRun: ...

    def restore(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """The persisted history as this mode may send it again (DESIGN.md §8)."""
        ...

    def recovery_note(self, recovery: Recovery) -> ChatMessage:
        """The labelled note that gives interrupted batches' effects back (§9.4)."""
        ...


NO_EVENTS: Final = Offer(events=[], accepts=None)
"""The offer of a dual-mode round with no events on offer, shared by every session
(an ``Offer`` is frozen and its readers never change its lists)."""


class DualMode:
    """Inline event blocks; a separate event agent fills in arguments and runs tools."""

    name: ToolInvocationMode = "dual_agent"
    accepts: StreamItemKind = "text_event"

    def offer(self, registry: ToolRegistry, names: list[str]) -> Offer:
        if not names:
            return NO_EVENTS
        return Offer(
            events=names,
            accepts=self.accepts,
            catalog=registry.chat_event_system_message(names),
            offered_names_only=True,
        )

    async def run_batch(self, ctx: RoundContext, streamed: StreamedRound) -> BatchRun:
        return await run_dual_batch(ctx, streamed)

    def restore(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return visible_history(messages)

    def recovery_note(self, recovery: Recovery) -> ChatMessage:
        return dual_note(recovery)


class DirectMode:
    """Provider function calling; the runtime runs the calls and replies in order."""

    name: ToolInvocationMode = "chat_agent_tools"
    accepts: StreamItemKind = "provider_tool_call"

    def offer(self, registry: ToolRegistry, names: list[str]) -> Offer:
        return Offer(
            events=names,
            accepts=self.accepts if names else None,
            tools=registry.provider_tool_schemas(names),
            unique_call_ids=True,
        )

    async def run_batch(self, ctx: RoundContext, streamed: StreamedRound) -> BatchRun:
        return await run_direct_batch(ctx, streamed)

    def restore(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return repair_tool_transcript(messages)

    def recovery_note(self, recovery: Recovery) -> ChatMessage:
        return direct_note(recovery)


_MODES: dict[ToolInvocationMode, ToolMode] = {
    mode.name: mode for mode in (DualMode(), DirectMode())
}


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
