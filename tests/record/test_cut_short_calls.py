"""A model call that breaks off mid-stream (the connection drops, the provider sends an
error event, a chunk is not JSON) or is cancelled is still a call that happened: what
was measured until then (first chunk, visible TTFT, latency, attempts, tokens when they
were reported) reaches the store and every view, live and reopened alike, and the turns
table counts it as the record does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.pricing import PriceTable
from agent_lab.application.record import ModelCallRecord, TurnRecord
from agent_lab.application.tools import ToolRegistry
from agent_lab.infrastructure.prices import price_table
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.web.records import session_record
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import process_env
from tests.record.record_support import (
    answer,
    assert_same_records,
    cancelled_session,
    notes_tool,
    reopened,
    request,
    run_once,
    spoken,
    with_events,
)

MODEL = "gpt-4o-mini"
"""A model the price table knows: a call's cost is unknown only for want of tokens."""

SHOWN = ("Okay let me ", "look that ", "up")


def _delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


_BREAKS: dict[str, dict[str, Any]] = {
    "connection_dropped": {"done": False, "abort": True},
    "error_event": {"done": False},
    "malformed_chunk": {"done": False},
}
_LAST_EVENT: dict[str, list[dict[str, Any] | bytes]] = {
    "connection_dropped": [],
    "error_event": [{"error": {"message": "internal server error", "code": 500}}],
    "malformed_chunk": [b'{"choices": [{"index": 0, "delta": {"content": "ne'],
}


def _broken(how: str, *tail: dict[str, Any]) -> ScriptedResponse:
    """Shows ``SHOWN`` (then ``tail``), then breaks off as ``how`` says."""
    events = [*(_delta(text) for text in SHOWN), *tail, *_LAST_EVENT[how]]
    return ScriptedResponse.sse(*events, **_BREAKS[how])


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return price_table()


def _cli(home: Path, *args: str) -> str:
    """``agent-lab`` as a real subprocess; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "agent_lab.interfaces.cli", *args],
        capture_output=True,
        text=True,
        env=process_env(home),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _turns_row(shown: str, turn_index: int) -> dict[str, str]:
    """One row of the ``sessions show`` turns table, by column name."""
    lines = shown.splitlines()
    header = next(line for line in lines if "┃ turn ┃" in line)
    names = [cell.strip() for cell in header.strip("┃").split("┃")]
    for line in lines:
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if line.startswith("│") and cells[0] == str(turn_index):
            return dict(zip(names, cells, strict=True))
    raise AssertionError(f"no row for turn {turn_index} in:\n{shown}")


def _chat_metric(database: Path, session_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session's one call metric and its turn's totals."""
    with SQLiteSessionStore(database) as store:
        summary = store.usage_summary(session_id)
    [metric] = summary["calls"]
    [turn] = summary["turns"]
    return metric, turn


def _assert_every_view_agrees(
    database: Path, session_id: str, record: TurnRecord, prices: PriceTable, home: Path
) -> None:
    """The stored metric, the export, the web lab's records and ``sessions show`` all
    tell the call as the live record does."""
    [call] = record.model_calls
    timings = call.timings
    metric, turn = _chat_metric(database, session_id)
    assert metric["metric_key"] == call.metric_key == "chat:1:1"
    assert metric["status"] == {"failed": "failed", "cancelled": "cancelled"}[call.status]
    assert timings.provider_first_chunk_ms is not None
    assert metric["ttft_ms"] == round(timings.provider_first_chunk_ms)
    assert metric["latency_ms"] == timings.latency_ms
    assert metric["usage_reported"] is (call.usage is not None)
    assert turn["model_calls"] == len(record.model_calls) == 1

    live = record.model_dump(mode="json")
    exported = json.loads(_cli(home, "sessions", "export", session_id, "--db", str(database)))
    assert exported["records"] == [live]
    with SQLiteSessionStore(database) as store:
        assert session_record(store, session_id, prices=prices)["records"] == [live]

    shown = _cli(home, "sessions", "show", session_id, "--db", str(database))
    row = _turns_row(shown, 1)
    assert (row["provider TTFT ms"], row["model calls"]) == (str(metric["ttft_ms"]), "1")
    [line] = [line for line in shown.splitlines() if "chat call chat:1:1" in line]
    assert f"TTFT {timings.provider_first_chunk_ms:.0f} ms" in line


def _assert_measured(call: ModelCallRecord, record: TurnRecord) -> None:
    """What was measured before the call ended reached its record."""
    timings = call.timings
    assert timings.provider_first_chunk_ms is not None
    assert timings.connect_ms is not None and timings.stream_ms is not None
    assert timings.latency_ms is not None and timings.attempts == 1
    assert timings.visible_ttft_ms is not None
    assert record.rounds[0].visible_ttft_ms == timings.visible_ttft_ms
    assert call.started_ms is not None
    assert call.ended_ms == call.started_ms + timings.latency_ms
    assert call.cold is not None


@pytest.mark.asyncio
@pytest.mark.parametrize("how", list(_BREAKS))
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_chat_call_broken_off_after_text_keeps_its_figures_in_every_view(
    sse_server: SSETranscriptServer,
    tmp_path: Path,
    lab_home: Path,
    prices: PriceTable,
    mode: str,
    how: str,
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(_broken(how))
    outputs, live, session_id = await run_once(
        sse_server.base_url, database, request(mode, [], model=MODEL), ToolRegistry(), prices=prices
    )

    assert outputs[-1]["type"] == "error"
    assert outputs[-1]["failure_reason"] == "provider_error:protocol"
    assert spoken(outputs) == "".join(SHOWN)
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id, prices=prices))
    [call] = record.model_calls
    assert (call.status, call.failure_reason) == ("failed", "provider_error:protocol")
    _assert_measured(call, record)
    # No usage came: the tokens are unknown, and so is the cost (never $0).
    assert call.usage is None
    assert (call.cost.amount_usd, call.cost.unknown_reason) == (None, "no_usage_reported")
    assert record.cost.total_usd is None and record.cost.unpriced_calls == 1
    metric, _ = _chat_metric(database, session_id)
    assert (metric["mode"], metric["total_tokens"], metric["usage_reported"]) == (mode, 0, False)
    _assert_every_view_agrees(database, session_id, record, prices, lab_home)


@pytest.mark.asyncio
async def test_tokens_reported_before_the_stream_broke_are_kept_and_priced(
    sse_server: SSETranscriptServer, tmp_path: Path, lab_home: Path, prices: PriceTable
) -> None:
    database = tmp_path / "sessions.sqlite3"
    usage = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    sse_server.add(_broken("connection_dropped", {"choices": [], "usage": usage}))
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("chat_agent_tools", [], model=MODEL),
        ToolRegistry(),
        prices=prices,
    )

    assert outputs[-1]["type"] == "error"
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id, prices=prices))
    [call] = record.model_calls
    assert call.status == "failed"
    assert call.usage is not None and call.usage.total_tokens == 43
    assert call.cost.amount_usd is not None and record.cost.total_usd == call.cost.amount_usd
    metric, turn = _chat_metric(database, session_id)
    assert (metric["usage_reported"], metric["total_tokens"], turn["total_tokens"]) == (
        True,
        43,
        43,
    )
    _assert_every_view_agrees(database, session_id, record, prices, lab_home)


@pytest.mark.asyncio
async def test_a_call_refused_before_any_chunk_counts_with_no_first_chunk(
    sse_server: SSETranscriptServer, tmp_path: Path, prices: PriceTable
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(ScriptedResponse.error(500, {"error": {"message": "upstream exploded"}}))
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("dual_agent", [], model=MODEL),
        ToolRegistry(),
        prices=prices,
    )

    assert outputs[-1]["failure_reason"] == "provider_error:http_500"
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id, prices=prices))
    [call] = record.model_calls
    assert (call.status, call.failure_reason) == ("failed", "provider_error:http_500")
    timings = call.timings
    assert timings.provider_first_chunk_ms is None and timings.visible_ttft_ms is None
    assert timings.latency_ms is not None and timings.attempts == sse_server.request_count == 1
    metric, turn = _chat_metric(database, session_id)
    assert (metric["status"], metric["ttft_ms"], metric["latency_ms"]) == (
        "failed",
        None,
        timings.latency_ms,
    )
    assert turn["model_calls"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_a_call_cancelled_mid_answer_is_a_cancelled_call_with_its_figures(
    sse_server: SSETranscriptServer, tmp_path: Path, lab_home: Path, prices: PriceTable, mode: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(ScriptedResponse.sse(*(_delta(text) for text in SHOWN), pause=0.5))
    outputs, live, session_id = await cancelled_session(
        sse_server.base_url,
        database,
        ToolRegistry(),
        request(mode, [], model=MODEL),
        when=lambda output, outputs: spoken(outputs) == SHOWN[0],
        prices=prices,
    )

    assert spoken(outputs) == SHOWN[0]
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id, prices=prices))
    assert record.status == "cancelled"
    [call] = record.model_calls
    assert (call.status, call.failure_reason) == ("cancelled", "cancelled")
    _assert_measured(call, record)
    assert call.usage is None and call.cost.amount_usd is None
    _assert_every_view_agrees(database, session_id, record, prices, lab_home)


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["connection_dropped", "malformed_chunk"])
async def test_an_argument_call_broken_off_is_a_failed_call_with_its_figures(
    sse_server: SSETranscriptServer, tmp_path: Path, prices: PriceTable, how: str
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(
        with_events("Noting it.", "notes_add"),
        _broken(how),  # the event agent's forced call
        answer("I could not keep that note."),
    )
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("dual_agent", ["notes_add"], "note: buy milk", model=MODEL),
        notes_tool(),
        prices=prices,
    )

    assert outputs[-1] == {"type": "done"}
    [record] = live.records()
    assert_same_records([record], reopened(database, session_id, prices=prices))
    [generation] = [c for c in record.model_calls if c.role == "argument_generation"]
    assert generation.status == "failed"
    timings = generation.timings
    assert timings.provider_first_chunk_ms is not None and timings.stream_ms is not None
    assert timings.latency_ms is not None and timings.attempts == 1
    assert generation.usage is None and generation.cost.amount_usd is None
    with SQLiteSessionStore(database) as store:
        summary = store.usage_summary(session_id)
    metrics = {m["metric_key"]: m for m in summary["calls"]}
    stored = metrics[generation.metric_key]
    assert stored["status"] == "failed" and stored["usage_reported"] is False
    assert stored["latency_ms"] == timings.latency_ms
    assert [metrics[c.metric_key]["status"] for c in record.model_calls] == [
        "success" if c.status == "succeeded" else c.status for c in record.model_calls
    ]
    assert summary["turns"][0]["model_calls"] == len(record.model_calls) == 3
