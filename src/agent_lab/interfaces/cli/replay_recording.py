"""What a replay needs from a persisted session: its request, user turns and chunks.

The recorded chunks come from the audits: ``chat_agent_response.details.raw_chunks``
for chat calls and ``event_agent_response.details.raw_model_chunks`` for the event
agent's forced calls; their timing from the call metrics. Each turn keeps the mode it
ran in (its ``chat_round_started`` audit), so a session continued with another
``--mode`` replays every turn in its own mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any, Literal

from agent_lab.application.contracts import DebugRunRequest, ToolInvocationMode
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionNotFound, UsageError
from agent_lab.interfaces.cli.common import MODES

__all__ = ["REPLAYABLE", "RecordedCall", "Recording", "load_recording"]


@dataclass(frozen=True)
class RecordedCall:
    """One model call as recorded: its chunks and timing."""

    kind: Literal["chat", "event"]
    turn_index: int
    round_index: int
    chunks: list[dict[str, Any]]
    function: str | None = None
    """Event calls: the provider function name the chunks call."""
    ttft_ms: int | None = None
    latency_ms: int | None = None
    offsets_ms: list[float] | None = None
    """When each chunk arrived after the request, as recorded (exact pacing)."""


@dataclass(frozen=True)
class Recording:
    """What a replay needs from a persisted session."""

    session_id: str
    request: DebugRunRequest
    user_turns: list[str]
    chat_calls: list[RecordedCall]
    event_calls: list[RecordedCall]
    ended_early: str | None = None
    """Why the replay stops before the recording's last turn (a failed or cancelled turn)."""
    modes: list[ToolInvocationMode] = field(default_factory=list)
    """The mode each of ``user_turns`` ran in (the session's mode where none is recorded)."""
    reopened: frozenset[int] = frozenset()
    """Positions in ``user_turns`` after a turn that terminated the session: the
    recording continued it (e.g. ``run --session``), so the replay reopens it there."""

    def segments(self) -> list[tuple[DebugRunRequest, list[str]]]:
        """The user turns in runs of one mode (a new run also where the recording
        reopened a terminated session), each with the request that starts it: its mode,
        its first message, the same session id."""
        found: list[tuple[DebugRunRequest, list[str]]] = []
        for index, text in enumerate(self.user_turns):
            mode = self.modes[index] if index < len(self.modes) else None
            mode = mode or self.request.tool_invocation_mode
            same = found and found[-1][0].tool_invocation_mode == mode
            if same and index not in self.reopened:
                found[-1][1].append(text)
                continue
            update = {"tool_invocation_mode": mode, "user_message": text}
            found.append((self.request.model_copy(update=update), [text]))
        return found


REPLAYABLE = frozenset({"completed", "terminated"})
"""Turn statuses whose recording is complete; a replay stops at the first other one."""


def load_recording(store: SessionStore, session_id: str) -> Recording:
    """Read a session's configuration, user turns and recorded chunks.

    Raises:
        SessionNotFound: no session has that id.
        UsageError: the session has no turns, or no configuration to replay with.
    """
    session = store.get_session(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    summary = store.usage_summary(session_id)
    rows = [turn for turn in summary["turns"] if turn.get("user_message")]
    if not rows:
        raise UsageError(f"session {session_id!r} has no recorded turns to replay")
    complete = list(takewhile(lambda turn: turn.get("status") in REPLAYABLE, rows))
    ended_early = _ended_early(session_id, rows, len(complete))
    turns = [str(turn["user_message"]) for turn in complete]
    request = _recorded_request(session, session_id, turns[0])
    timing = _call_timing(summary["calls"])
    audits = store.list_audit_logs(session_id)
    chat, event = _recorded_calls(audits, timing)
    last = int(complete[-1]["turn_index"])
    chat = [call for call in chat if call.turn_index <= last]
    event = [call for call in event if call.turn_index <= last]
    ran_in = _turn_modes(audits)
    modes = [ran_in.get(int(turn["turn_index"]), request.tool_invocation_mode) for turn in complete]
    reopened = frozenset(
        index + 1 for index, turn in enumerate(complete) if turn.get("status") == "terminated"
    )
    return Recording(session_id, request, turns, chat, event, ended_early, modes, reopened)


def _turn_modes(audits: Iterable[Mapping[str, Any]]) -> dict[int, ToolInvocationMode]:
    """The mode each turn ran in, as its first chat round recorded it."""
    modes: dict[int, ToolInvocationMode] = {}
    for audit in audits:
        details = audit.get("details") or {}
        if audit.get("event") != "chat_round_started":
            continue
        turn = int(audit.get("turn_index") or details.get("turn_index") or 0)
        for mode in MODES:
            if details.get("tool_invocation_mode") == mode:
                modes.setdefault(turn, mode)
    return modes


def _ended_early(session_id: str, rows: Sequence[Mapping[str, Any]], complete: int) -> str | None:
    """Explain a recording that stops at a failed or cancelled turn (``None``: it does not).

    Raises:
        UsageError: already the first turn is incomplete, so nothing can be replayed.
    """
    if complete == len(rows):
        return None
    stopped = rows[complete]
    index, status = stopped["turn_index"], stopped.get("status") or "unfinished"
    why = (
        f"turn {index} was {status} in the recording, so its recorded model calls end early"
        " and cannot be replayed"
    )
    if complete == 0:
        raise UsageError(
            f"session {session_id!r} cannot be replayed: {why}; only completed turns can be,"
            " and this session has none before it"
        )
    later = len(rows) - complete - 1
    replayed = "turn 1 is" if complete == 1 else f"turns 1–{complete} are"
    skipped = f"turn {index} and the {later} turn(s) after it are" if later else f"turn {index} is"
    return f"{why}; {replayed} replayed and compared, {skipped} not"


def _recorded_request(
    session: Mapping[str, Any], session_id: str, first_turn: str
) -> DebugRunRequest:
    config = dict(session.get("config") or {})
    fields = set(DebugRunRequest.model_fields) - {"session_id", "user_message"}
    if "chat_agent" not in config:
        raise UsageError(f"session {session_id!r} has no recorded configuration to replay with")
    kept = {key: value for key, value in config.items() if key in fields}
    return DebugRunRequest.model_validate(
        {**kept, "session_id": session_id, "user_message": first_turn}
    )


def _call_timing(calls: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int | None, int | None]]:
    timing: dict[str, tuple[int | None, int | None]] = {}
    for call in calls:
        if call.get("call_kind") == "chat":
            key = f"chat:{call['turn_index']}:{call['round_index']}"
        elif call.get("call_kind") in ("argument_fallback", "argument_generation"):
            key = f"event:{call.get('event_id')}"
        else:
            continue
        timing[key] = (call.get("ttft_ms"), call.get("latency_ms"))
    return timing


def _recorded_calls(
    audits: Iterable[Mapping[str, Any]], timing: Mapping[str, tuple[int | None, int | None]]
) -> tuple[list[RecordedCall], list[RecordedCall]]:
    chat: list[RecordedCall] = []
    event: list[RecordedCall] = []
    for audit in audits:
        details = audit.get("details") or {}
        turn = int(audit.get("turn_index") or details.get("turn_index") or 0)
        round_index = int(details.get("round_index") or 0)
        if audit.get("event") == "chat_agent_response":
            ttft, latency = timing.get(f"chat:{turn}:{round_index}", (None, None))
            chunks = list(details.get("raw_chunks") or [])
            offsets = _offsets(details.get("raw_chunk_offsets_ms"), chunks)
            chat.append(
                RecordedCall("chat", turn, round_index, chunks, None, ttft, latency, offsets)
            )
        elif audit.get("event") == "event_agent_response":
            for entry in details.get("raw_model_chunks") or []:
                if entry.get("chunks"):
                    ttft, latency = timing.get(f"event:{entry.get('event_id')}", (None, None))
                    chunks = list(entry["chunks"])
                    function = _called_function(chunks)
                    offsets = _offsets(entry.get("chunk_offsets_ms"), chunks)
                    event.append(
                        RecordedCall(
                            "event", turn, round_index, chunks, function, ttft, latency, offsets
                        )
                    )
    return chat, event


def _offsets(recorded: Any, chunks: Sequence[Any]) -> list[float] | None:
    if isinstance(recorded, list) and len(recorded) == len(chunks):
        return [float(value) for value in recorded]
    return None  # recorded before arrival offsets were kept: pace from the metrics


def _called_function(chunks: Iterable[Mapping[str, Any]]) -> str | None:
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                name = (call.get("function") or {}).get("name")
                if name:
                    return str(name)
    return None
