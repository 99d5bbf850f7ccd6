"""The live export equals the later one, span for span (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_lab.infrastructure import telemetry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.telemetry.convert import ConvertOptions
from agent_lab.infrastructure.telemetry.otlp import OtlpSink
from tests.telemetry.telemetry_support import run_session, run_turn


def _sink() -> tuple[OtlpSink, InMemorySpanExporter, InMemoryMetricReader]:
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    return OtlpSink(span_exporter=spans, metric_reader=metrics), spans, metrics


def _exported(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    found = [json.loads(span.to_json()) for span in exporter.get_finished_spans()]
    return sorted(found, key=lambda span: span["context"]["span_id"])


OPTIONS = ConvertOptions(capture_content=True)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_turns_live_spans_equal_its_later_export(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path, mode: str
) -> None:
    sink, live_spans, _ = _sink()
    live = telemetry.live_telemetry(store, sink=sink, options=OPTIONS)
    turn = await run_turn(client, store, tmp_path, mode, queues=live.queues())
    await live.aclose()
    later_sink, later_spans, _ = _sink()

    sent = telemetry.export_session(store, turn.session_id, sink=later_sink, options=OPTIONS)

    assert sent == len(_exported(live_spans)) > 10
    assert _exported(live_spans) == _exported(later_spans)


@pytest.mark.asyncio
async def test_a_sessions_turns_go_out_as_they_end_and_equal_the_later_export(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    sink, live_spans, _ = _sink()
    live = telemetry.live_telemetry(store, sink=sink, options=OPTIONS)
    messages = ["Set the volume to 30", "Now look up SQLite WAL"]
    turn = await run_session(client, store, tmp_path, "dual_agent", messages, queues=live.queues())
    await live.aclose()
    later_sink, later_spans, _ = _sink()

    telemetry.export_session(store, turn.session_id, sink=later_sink, options=OPTIONS)

    live_found = _exported(live_spans)
    assert [s["name"] for s in live_found if s["name"].startswith("turn")].count("turn 2") == 1
    assert [s["name"] for s in live_found].count("session") == 1
    assert live_found == _exported(later_spans)


@pytest.mark.asyncio
async def test_histograms_of_ttft_turn_and_tool_latency_and_tokens(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    sink, _, reader = _sink()
    live = telemetry.live_telemetry(store, sink=sink)
    turn = await run_turn(client, store, tmp_path, "dual_agent", queues=live.queues())
    await live.flush()
    data = reader.get_metrics_data()
    await live.aclose()

    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    model_calls = [
        c
        for c in store.usage_summary(turn.session_id)["calls"]
        if c["call_kind"] != "tool_execution"
    ]
    assert sum(p.count for p in points["gen_ai.client.operation.time_to_first_chunk"]) == len(
        model_calls
    )
    assert sum(p.count for p in points["agent_lab.turn.duration"]) == 1
    assert sum(p.count for p in points["agent_lab.tool.duration"]) == 3
    tokens = points["gen_ai.client.token.usage"]
    total = sum(c["prompt_tokens"] + c["completion_tokens"] for c in model_calls)
    assert sum(p.sum for p in tokens) == total
    assert {p.attributes["gen_ai.token.type"] for p in tokens} == {"input", "output"}
