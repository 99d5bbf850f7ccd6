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
import re
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
VOLATILE_KEYS = frozenset({"id", "created_at", "updated_at", "timestamp", "landed_at"})
_VOLATILE_VALUE = re.compile(r"\b(?:evt|call|cal|note|chatcmpl)[_-][0-9A-Za-z]{6,}\b")
_MAX_SHOWN = 160


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
    turns = [str(turn["user_message"]) for turn in summary["turns"] if turn.get("user_message")]
    if not turns:
        raise UsageError(f"session {session_id!r} has no recorded turns to replay")
    request = _recorded_request(session, session_id, turns[0])
    timing = _call_timing(summary["calls"])
    chat, event = _recorded_calls(store.list_audit_logs(session_id), timing)
    return Recording(session_id, request, turns, chat, event)


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


# ------------------------------------------------------------------ comparison


@dataclass(frozen=True)
class TurnRecord:
    """What is compared of one turn."""

    turn_index: int
    status: str | None
    round_count: int | None
    text: str
    events: list[Any] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)


def normalize(value: Any, ignore: frozenset[str] = frozenset()) -> Any:
    """``value`` with volatile ids and timestamps replaced, JSON strings parsed.

    Keys named ``id``, ``*_id``, ``created_at``, ``updated_at``, ``timestamp`` (and
    ``ignore``) become ``"<volatile>"``; generated ids inside strings become ``<id>``.
    """
    if isinstance(value, dict):
        return {
            key: "<volatile>" if _volatile(key, ignore) else normalize(item, ignore)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [normalize(item, ignore) for item in value]
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return normalize(orjson.loads(stripped), ignore)
            except orjson.JSONDecodeError:
                pass
        return _VOLATILE_VALUE.sub("<id>", value)
    return value


def _volatile(key: str, ignore: frozenset[str]) -> bool:
    return key in VOLATILE_KEYS or key.endswith("_id") or key in ignore


def turn_records(
    store: SessionStore, session_id: str, ignore: frozenset[str] = frozenset()
) -> list[TurnRecord]:
    """Read back every turn of a session in the form that is compared."""
    summary = store.usage_summary(session_id)
    texts: dict[int, str] = {}
    for message in store.list_messages(session_id):
        if message.get("role") == "assistant" and message.get("content"):
            index = int(message["turn_index"])
            texts[index] = texts.get(index, "") + str(message["content"])
    events: dict[int, list[Any]] = {}
    for audit in store.list_audit_logs(session_id):
        if audit.get("event") == "chat_event_detected":
            details = audit.get("details") or {}
            event = details.get("event") or {}
            entry = [details.get("round_index"), event.get("name"), event.get("arguments")]
            events.setdefault(int(audit.get("turn_index") or 0), []).append(
                normalize(entry, ignore)
            )
    results = _tool_results(store.list_batches(session_id), ignore)
    return [
        TurnRecord(
            turn_index=int(turn["turn_index"]),
            status=turn.get("status"),
            round_count=turn.get("round_count"),
            text=texts.get(int(turn["turn_index"]), ""),
            events=events.get(int(turn["turn_index"]), []),
            tool_results=results.get(int(turn["turn_index"]), []),
        )
        for turn in summary["turns"]
    ]


def _tool_results(
    batches: Iterable[Mapping[str, Any]], ignore: frozenset[str]
) -> dict[int, list[Any]]:
    results: dict[int, list[Any]] = {}
    for batch in batches:
        for call in batch.get("calls") or []:
            event = call.get("event") or {}
            result = call.get("result") or {}
            entry = [batch.get("round_index"), event.get("name"), call.get("state")]
            entry.append(normalize(result.get("content"), ignore))
            results.setdefault(int(batch.get("turn_index") or 0), []).append(entry)
    return results


def compare_turns(recorded: Sequence[TurnRecord], replayed: Sequence[TurnRecord]) -> list[str]:
    """Human-readable differences between two sessions' turns (empty when identical)."""
    differences: list[str] = []
    mine = {turn.turn_index: turn for turn in replayed}
    for turn in recorded:
        other = mine.pop(turn.turn_index, None)
        if other is None:
            differences.append(f"turn {turn.turn_index}: recorded, but not reached in the replay")
            continue
        differences += _turn_differences(turn, other)
    differences += [f"turn {index}: replayed, but not in the recording" for index in sorted(mine)]
    return differences


def _turn_differences(recorded: TurnRecord, replayed: TurnRecord) -> list[str]:
    where = f"turn {recorded.turn_index}"
    found = []
    for name in ("status", "round_count"):
        before, after = getattr(recorded, name), getattr(replayed, name)
        if before != after:
            found.append(f"{where}: {name.replace('_', ' ')} {before} → {after}")
    if recorded.text != replayed.text:
        found.append(f"{where}: visible text differs\n{_text_diff(recorded.text, replayed.text)}")
    if recorded.events != replayed.events:
        found.append(f"{where}: events {_shown(recorded.events)} → {_shown(replayed.events)}")
    for before, after in _pairs(recorded.tool_results, replayed.tool_results):
        if before != after:
            found.append(f"{where}: tool result {_shown(before)} → {_shown(after)}")
    return found


def _pairs(left: Sequence[Any], right: Sequence[Any]) -> Iterable[tuple[Any, Any]]:
    for index in range(max(len(left), len(right))):
        yield (
            left[index] if index < len(left) else None,
            right[index] if index < len(right) else None,
        )


def _text_diff(before: str, after: str) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    start = max(0, at - 40)
    return (
        f"    recorded: …{before[start : start + _MAX_SHOWN]!r}\n"
        f"    replayed: …{after[start : start + _MAX_SHOWN]!r}"
    )


def _shown(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


# ------------------------------------------------------------------ replay


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of a replay."""

    session_id: str
    turns: int
    differences: list[str]

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
    differences = compare_turns(turn_records(store, session_id, ignore), replayed)
    differences += [f"the replay made {what} the recording lacks" for what in transport.unexpected]
    differences += [
        f"the recorded {call.kind} call of turn {call.turn_index}, round {call.round_index}, "
        "was not made"
        for call in transport.unused
    ]
    return ReplayReport(session_id, len(recording.user_turns), differences)


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
