"""Replay a persisted session against its recorded provider chunks, with the current code.

The recorded chunks come from the audits: ``chat_agent_response.details.raw_chunks``
for chat calls and ``event_agent_response.details.raw_model_chunks`` for the event
agent's forced calls. ``ReplayTransport`` serves them over an ``httpx`` transport to
the real ``OpenAICompatibleChatClient``, so they go through the same request building,
tool-name aliasing, SSE decoding and chunk parsing as a live run. Chunks are paced
with the recorded per-call timing (time to first chunk, then the rest of the call's
latency spread evenly for recordings older than the per-chunk arrival offsets),
scaled by ``speed``.

The replay never touches the original session: it runs in a temporary database with
the same session id, and the tools run for real on a fresh, temporary data directory.
Both sessions are then read back through the same store API and compared per turn:
visible text, events, tool results (ids and timestamps ignored) and round counts.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import Any, Literal

import httpx
import orjson

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionNotFound, UsageError
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli.common import scratch_registry
from agent_lab.interfaces.cli.driver import SessionDriver, TurnHooks, drive_turns
from agent_lab.interfaces.cli.replay_compare import (
    TurnRecord,
    compare_turns,
    differing_result_keys,
    normalize,
    turn_records,
)

__all__ = [
    "RecordedCall",
    "Recording",
    "ReplayReport",
    "ReplayTransport",
    "TurnRecord",
    "compare_turns",
    "load_recording",
    "normalize",
    "replay_session",
    "turn_records",
]

REPLAY_BASE_URL = "http://replay.agent-lab.invalid/v1"


# ------------------------------------------------------------------ recording


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
    chat, event = _recorded_calls(store.list_audit_logs(session_id), timing)
    last = int(complete[-1]["turn_index"])
    chat = [call for call in chat if call.turn_index <= last]
    event = [call for call in event if call.turn_index <= last]
    return Recording(session_id, request, turns, chat, event, ended_early)


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


# ------------------------------------------------------------------ transport


class _PacedStream(httpx.AsyncByteStream):
    def __init__(self, chunks: Sequence[Mapping[str, Any]], delays: Sequence[float]) -> None:
        self._chunks = chunks
        self._delays = delays

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk, delay in zip(self._chunks, self._delays, strict=True):
            if delay > 0:
                await asyncio.sleep(delay)
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
        yield b"data: [DONE]\n\n"


def pacing(call: RecordedCall, speed: float) -> list[float]:
    """Seconds to wait before each chunk: the recorded gaps between chunk arrivals, or
    (for older recordings) the recorded TTFT, then the rest spread evenly.

    ``speed`` divides every delay; ``0`` replays without waiting.
    """
    count = len(call.chunks)
    if speed <= 0 or count == 0:
        return [0.0] * count
    if call.offsets_ms is not None:
        previous = [0.0, *call.offsets_ms[:-1]]
        return [
            max(0.0, now - before) / 1000 / speed
            for now, before in zip(call.offsets_ms, previous, strict=True)
        ]
    ttft = (call.ttft_ms or 0) / 1000
    rest = max(0.0, ((call.latency_ms or 0) / 1000) - ttft)
    step = rest / (count - 1) if count > 1 else 0.0
    return [ttft / speed] + [step / speed] * (count - 1)


class ReplayTransport(httpx.AsyncBaseTransport):
    """Answers chat-completion requests with the recorded chunks, in recorded order.

    Forced-tool-choice requests (the event agent's argument calls) take the next
    recorded event call for the same function; every other request takes the next
    recorded chat call. A request the recording cannot answer gets an HTTP 500 and is
    listed in ``unexpected``.
    """

    def __init__(self, recording: Recording, *, speed: float = 1.0) -> None:
        self.speed = speed
        self._chat = list(recording.chat_calls)
        self._event = list(recording.event_calls)
        self.unexpected: list[str] = []

    @property
    def unused(self) -> list[RecordedCall]:
        """Recorded calls nobody asked for."""
        return [*self._chat, *self._event]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(await request.aread() or b"{}")
        call = self._take(body)
        if call is None:
            return httpx.Response(
                500, json={"error": {"message": "replay: the recording has no such model call"}}
            )
        stream = _PacedStream(call.chunks, pacing(call, self.speed))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    def _take(self, body: Mapping[str, Any]) -> RecordedCall | None:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            wanted = (choice.get("function") or {}).get("name")
            for index, call in enumerate(self._event):
                if call.function == wanted:
                    return self._event.pop(index)
            if self._event:
                return self._event.pop(0)
            self.unexpected.append(f"an argument call for {wanted}")
            return None
        if self._chat:
            return self._chat.pop(0)
        self.unexpected.append("a chat call")
        return None


# ------------------------------------------------------------------ replay


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of a replay."""

    session_id: str
    turns: int
    differences: list[str]
    notes: list[str] = field(default_factory=list)
    """What the replay left out, e.g. a failed turn and those after it."""
    differing_keys: list[str] = field(default_factory=list)
    """Keys inside tool results whose values differ (candidates for ``--ignore-key``)."""

    @property
    def identical(self) -> bool:
        """The replay reproduced the recording."""
        return not self.differences


async def replay_session(
    store: SessionStore,
    session_id: str,
    *,
    speed: float = 1.0,
    hooks: TurnHooks | None = None,
    ignore: frozenset[str] = frozenset(),
) -> ReplayReport:
    """Replay a persisted session and compare it with the recording.

    Raises:
        SessionNotFound: no session has that id.
        UsageError: the session has nothing to replay.
    """
    recording = load_recording(store, session_id)
    transport = ReplayTransport(recording, speed=speed)
    with (
        tempfile.TemporaryDirectory(prefix="agent-lab-replay-") as directory,
        SQLiteSessionStore(Path(directory) / "replay.sqlite3") as scratch,
    ):
        await _drive(recording, transport, scratch, hooks or TurnHooks())
        replayed = turn_records(scratch, session_id, ignore)
    recorded = turn_records(store, session_id, ignore)[: len(recording.user_turns)]
    differences = compare_turns(recorded, replayed)
    differences += [f"the replay made {what} the recording lacks" for what in transport.unexpected]
    differences += [
        f"the recorded {call.kind} call of turn {call.turn_index}, round {call.round_index}, "
        "was not made"
        for call in transport.unused
    ]
    notes = [recording.ended_early] if recording.ended_early else []
    keys = differing_result_keys(recorded, replayed)
    return ReplayReport(session_id, len(recording.user_turns), differences, notes, keys)


async def _drive(
    recording: Recording,
    transport: ReplayTransport,
    scratch: SQLiteSessionStore,
    hooks: TurnHooks,
) -> None:
    async with (
        httpx.AsyncClient(transport=transport) as http,
        OpenAICompatibleChatClient(REPLAY_BASE_URL, max_retries=0, http_client=http) as client,
    ):
        with scratch_registry() as registry:
            runtime = DebugRuntime(client, registry=registry, session_store=scratch)
            driver = SessionDriver(runtime, hooks.observer)
            try:
                await drive_turns(driver, recording.request, recording.user_turns, hooks)
            finally:
                await driver.aclose()
