"""Comparable call metrics (DESIGN.md §7): what one model call or tool run cost."""

from __future__ import annotations

import contextlib
import gc
import struct
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from agent_lab.application._outputs import NO_USAGE
from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.events import EventBatchResult, EventSource
from agent_lab.application.session_store import CallKind, CallMetric
from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.json_values import JsonTextList
from agent_lab.domain.messages import TokenUsage

ColdReason = Literal["client_warm_up", "first_call_of_client"]
ModelCallStatus = Literal["success", "failed", "cancelled"]
"""A model call's persisted status, in the words of a tool execution's (``EventStatus``)."""


@dataclass(slots=True)
class ModelCall:
    """One streamed model call as the runtime observed it.

    The raw chunks are kept as the JSON texts the client gave, end to end in one
    ``bytearray``, with where each ends and when it arrived packed in another: neither
    is an object the garbage collector tracks or counts, however many chunks a call
    streams. They are decoded only when the response audit is built (``raw_chunks``)."""

    model: str
    usage: TokenUsage | None = None
    ttft_ms: int | None = None
    latency_ms: int | None = None
    sent_at: float = field(default_factory=time.perf_counter)
    timing: CallTiming | None = None
    """What the client measured (warm-up, connect, first chunk); ``None`` for clients
    that report nothing (test doubles)."""
    cold_reasons: tuple[ColdReason, ...] = ()
    """Why the call is cold, if it is: it waited for client warm-up, or it was the
    first call this process made through its client (connection setup)."""
    failed: bool = False
    """The call broke off: its stream ended in an error (its figures are what was
    measured until then)."""
    finish_reason: str | None = None
    """Why the provider ended the answer (``stop``, ``tool_calls``, ``length``…), as the
    stream reports it or, for clients that do not, as its last chunks say."""
    _texts: bytearray = field(default_factory=bytearray, repr=False)
    """The chunks' JSON texts, end to end."""
    _marks: bytearray = field(default_factory=bytearray, repr=False)
    """Per chunk (``_MARK``): where its text ends in ``_texts`` (0 for one kept in
    ``_dicts``) and ``perf_counter()`` when it arrived."""
    _dicts: list[bytes | dict[str, Any]] | None = field(default=None, repr=False)
    """Every chunk so far, once one came without its JSON text (test doubles)."""

    @property
    def cold(self) -> bool:
        return bool(self.cold_reasons)

    def observe(self, stream: object, *, first_of_client: bool) -> None:
        """Take the client's timing of ``stream`` once it ended; provider TTFT comes from
        it when the client measured it, so it never includes client warm-up. The usage
        the stream reports (``stream.usage``) is taken when no ``usage`` item came: the
        stream broke off after the provider reported it."""
        timing = getattr(stream, "timing", None)
        self.timing = timing if isinstance(timing, CallTiming) else None
        reasons: list[ColdReason] = []
        if self.timing is not None and self.timing.cold:
            reasons.append("client_warm_up")
        if first_of_client:
            reasons.append("first_call_of_client")
        self.cold_reasons = tuple(reasons)
        if self.timing is not None and self.timing.first_chunk_ms is not None:
            self.ttft_ms = round(self.timing.first_chunk_ms)
        reported = getattr(stream, "usage", None)
        if self.usage is None and isinstance(reported, TokenUsage):
            self.usage = reported  # a stream that broke off after its usage report
        finish = getattr(stream, "finish_reason", _NOT_TOLD)
        if finish is None or isinstance(finish, str):
            self.finish_reason = finish
        else:  # a client whose streams do not say (test doubles): the chunks do
            self.finish_reason = self._chunk_finish_reason()

    def _chunk_finish_reason(self) -> str | None:
        """The ``finish_reason`` of the last chunks kept (a client that reports none
        itself): the usage report may follow it, so a few chunks from the end."""
        if self._dicts is not None:
            chunks: list[bytes | dict[str, Any]] = self._dicts[-_FINISH_LOOKBACK:]
        else:
            ends = [0, *(end for end, _ in _MARK.iter_unpack(self._marks))]
            last = ends[-_FINISH_LOOKBACK - 1 :]
            chunks = [bytes(self._texts[a:b]) for a, b in zip(last, last[1:], strict=False)]
        for chunk in reversed(chunks):
            reason = _finish_of(orjson.loads(chunk) if isinstance(chunk, bytes) else chunk)
            if reason is not None:
                return reason
        return None

    @property
    def warmup_ms(self) -> float:
        """Client warm-up this call waited for (0 when none or unknown)."""
        return self.timing.warmup_ms if self.timing is not None else 0.0

    def add_chunk(self, chunk: dict[str, Any], raw_json: bytes | None = None) -> None:
        """Keep one raw chunk: its JSON text when the client gave it, else the dict."""
        arrived = time.perf_counter()
        if self._dicts is None and raw_json is not None:
            self._texts += raw_json
            self._marks += _MARK.pack(len(self._texts), arrived)
            return
        if self._dicts is None:
            self._dicts = list(self._text_list())
        self._dicts.append(raw_json if raw_json is not None else chunk)
        self._marks += _MARK.pack(0, arrived)

    @property
    def chunk_offsets_ms(self) -> list[float]:
        """When each raw chunk arrived, in ms after the request (wall clock, for replay
        pacing only; metrics use the injected clock)."""
        sent = self.sent_at
        return [round((arrived - sent) * 1000, 3) for _, arrived in _MARK.iter_unpack(self._marks)]

    @property
    def raw_chunks(self) -> list[dict[str, Any]]:
        """The chunks as dicts, exactly as the provider sent them; when the client gave
        every chunk's JSON text, a ``JsonTextList`` that keeps those texts, so a store
        writes the provider's bytes as they came."""
        return self.decoded_chunks(keep_texts=True)

    def decoded_chunks(self, *, keep_texts: bool) -> list[dict[str, Any]]:
        """``raw_chunks``; ``keep_texts=False`` leaves the JSON texts out (nothing will
        store them), a plain list of the decoded chunks."""
        # Many new, long-lived dicts at once: collecting while they are being built
        # only scans them again and again, so the collector waits until the end.
        paused = gc.isenabled()
        gc.disable()
        try:
            if self._dicts is not None:
                return [orjson.loads(c) if isinstance(c, bytes) else c for c in self._dicts]
            if not keep_texts:
                return self._decoded(memoryview(self._texts))
            texts = self._text_list()
            items = JsonTextList(map(orjson.loads, texts), texts) if texts else []
        finally:
            if paused:
                gc.enable()
        return items

    def _decoded(self, view: memoryview) -> list[dict[str, Any]]:
        start, items = 0, []
        with view:
            for end, _ in _MARK.iter_unpack(self._marks):
                items.append(orjson.loads(view[start:end]))
                start = end
        return items

    def _text_list(self) -> list[bytes]:
        texts, start = [], 0
        with memoryview(self._texts) as view:
            for end, _ in _MARK.iter_unpack(self._marks):
                texts.append(bytes(view[start:end]))
                start = end
        return texts


_MARK = struct.Struct("=Qd")
"""A raw chunk's mark: where its JSON text ends, and when it arrived."""
_NOT_TOLD = object()
_FINISH_LOOKBACK = 4
"""How many chunks from the end a ``finish_reason`` is looked for in."""


def _finish_of(chunk: object) -> str | None:
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        if reason and isinstance(reason, str):
            return reason
    return None


class RawChunks:
    """Fills a response audit's ``raw_chunks`` with the call's decoded chunks, when
    called (the audit's ``complete``: see ``Auditor.emit``)."""

    __slots__ = ("_call", "_details", "_keep_texts")

    def __init__(self, call: ModelCall, details: dict[str, Any], *, keep_texts: bool) -> None:
        self._call, self._details, self._keep_texts = call, details, keep_texts

    def __call__(self) -> None:
        self._details["raw_chunks"] = self._call.decoded_chunks(keep_texts=self._keep_texts)


class ClientCalls:
    """Which client objects this process has already called (for the ``cold`` flag)."""

    def __init__(self) -> None:
        self._seen: weakref.WeakSet[object] = weakref.WeakSet()
        self._seen_ids: set[int] = set()

    def first_use(self, client: object) -> bool:
        """True the first time ``client`` is asked; later calls find it used."""
        try:
            if client in self._seen:
                return False
            self._seen.add(client)
        except TypeError:  # unhashable (e.g. a dataclass): remember it by id until it dies
            key = id(client)
            if key in self._seen_ids:
                return False
            self._seen_ids.add(key)
            with contextlib.suppress(TypeError):  # no weak references: the id stays taken
                weakref.finalize(client, self._seen_ids.discard, key)
        return True


CLIENT_CALLS = ClientCalls()
"""One per process: a client's first call pays connection setup."""


def chat_metric_key(turn_index: int, round_index: int) -> str:
    return f"chat:{turn_index}:{round_index}"


def argument_metric_key(fallback: bool, turn_index: int, round_index: int, event_id: str) -> str:
    prefix = "fallback" if fallback else "generation"
    return f"{prefix}:{turn_index}:{round_index}:{event_id}"


def tool_metric_key(turn_index: int, round_index: int, event_id: str) -> str:
    return f"tool:{turn_index}:{round_index}:{event_id}"


def chat_metric(
    call: ModelCall,
    *,
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    status: ModelCallStatus | None = None,
) -> CallMetric:
    """A chat call's metric; ``status`` defaults to what the call says of itself
    (``cancelled`` is the engine's to say: the call cannot tell)."""
    return _model_metric(
        call,
        metric_key=chat_metric_key(turn_index, round_index),
        call_kind="chat",
        agent="chat_agent",
        turn_index=turn_index,
        round_index=round_index,
        mode=mode,
        status=status,
    )


def argument_metric(
    call: ModelCall,
    *,
    fallback: bool,
    event_id: str,
    event_name: str,
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    status: ModelCallStatus | None = None,
) -> CallMetric:
    """A forced-tool-choice call: ``argument_fallback`` when a resolver failed, else
    ``argument_generation``; ``status`` as for ``chat_metric``."""
    return _model_metric(
        call,
        metric_key=argument_metric_key(fallback, turn_index, round_index, event_id),
        call_kind="argument_fallback" if fallback else "argument_generation",
        agent="event_agent",
        turn_index=turn_index,
        round_index=round_index,
        mode=mode,
        event_id=event_id,
        event_name=event_name,
        status=status,
    )


def _model_metric(
    call: ModelCall,
    *,
    metric_key: str,
    call_kind: CallKind,
    agent: Any,
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    event_id: str | None = None,
    event_name: str | None = None,
    status: ModelCallStatus | None = None,
) -> CallMetric:
    """What was measured of the call, finished or not: tokens only as reported
    (``usage_reported=False`` with zeros otherwise), never estimated."""
    usage = call.usage or NO_USAGE
    return CallMetric(
        metric_key=metric_key,
        turn_index=turn_index,
        round_index=round_index,
        call_kind=call_kind,
        agent=agent,
        mode=mode,
        model=call.model,
        event_id=event_id,
        event_name=event_name,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        cached_tokens=usage.cached_tokens,
        usage_reported=call.usage is not None,
        finish_reason=call.finish_reason,
        ttft_ms=call.ttft_ms,
        latency_ms=call.latency_ms,
        status=status or ("failed" if call.failed else "success"),
    )


def tool_metrics(
    batch: EventBatchResult,
    *,
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode | None = None,
) -> list[CallMetric]:
    """One ``tool_execution`` metric per logical result (coalesced duplicates left out).

    ``mode`` defaults to the one the results' source implies.
    """
    return [
        CallMetric(
            metric_key=tool_metric_key(turn_index, round_index, result.event_id),
            turn_index=turn_index,
            round_index=round_index,
            call_kind="tool_execution",
            agent="tool",
            mode=mode or _MODE_OF_SOURCE[result.source],
            event_id=result.event_id,
            event_name=result.event_name,
            tool_latency_ms=result.tool_latency_ms,
            status=result.status.value,
        )
        for result in batch.logical_results
    ]


_MODE_OF_SOURCE: dict[EventSource, ToolInvocationMode] = {
    EventSource.TEXT_EVENT: "dual_agent",
    EventSource.PROVIDER_TOOL_CALL: "chat_agent_tools",
}
SOURCE_OF_MODE: dict[ToolInvocationMode, EventSource] = {
    mode: source for source, mode in _MODE_OF_SOURCE.items()
}
"""Where a mode's tool calls come from: the inverse of the table above."""
