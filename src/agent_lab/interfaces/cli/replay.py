"""Replay a persisted session against its recorded provider chunks, with the current code.

The recording (``replay_recording``) is the session's request, user turns and recorded
chunks. ``ReplayTransport`` serves them over an ``httpx`` transport to
the real ``OpenAICompatibleChatClient``, so they go through the same request building,
tool-name aliasing, SSE decoding and chunk parsing as a live run. Chunks are paced
with the recorded per-call timing (time to first chunk, then the rest of the call's
latency spread evenly for recordings older than the per-chunk arrival offsets),
scaled by ``speed``.

Each turn is replayed in the mode it ran in (a session continued with another
``--mode`` has turns of both): where the mode changes, the replay continues the
session with the new mode, as ``run --session ID --mode MODE`` did.

The replay never touches the original session: it runs in a temporary database with
the same session id, and the tools run for real on a fresh, temporary data directory.
Both sessions are then read back through the same store API and compared per turn:
visible text, events, tool results (ids and timestamps ignored) and round counts.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_store import SessionStore
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
from agent_lab.interfaces.cli.replay_recording import RecordedCall, Recording, load_recording

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
            for request, turns in recording.segments():
                runtime = DebugRuntime(client, registry=registry, session_store=scratch)
                driver = SessionDriver(runtime, hooks.observer)
                try:
                    ends = await drive_turns(driver, request, turns, hooks)
                finally:
                    await driver.aclose()
                if len(ends) < len(turns):
                    break  # the session ended before the recording's did
