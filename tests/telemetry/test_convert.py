"""The converter on real recorded turns: span tree, times, GenAI attributes, content."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.pricing import Price
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.prices import price_table
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.telemetry.convert import ConvertOptions, turn_spans
from agent_lab.infrastructure.telemetry.export import StoredSession, session_spans
from agent_lab.infrastructure.telemetry.record import anchors
from agent_lab.infrastructure.telemetry.spans import NS_PER_MS, SpanData
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.telemetry.telemetry_support import API_KEY, by_name, children, one, run_turn

CHAT = "chat agent-lab-sim"


def _stored(store: SQLiteSessionStore, session_id: str) -> StoredSession:
    stored = StoredSession(session_id)
    stored.refresh(store)
    return stored


def _audit(stored: StoredSession, name: str, round_index: int) -> dict[str, Any]:
    return next(
        a["details"]
        for a in stored.turns[1]
        if a["event"] == name and a["details"].get("round_index") == round_index
    )


@pytest.mark.asyncio
async def test_a_dual_agent_turn_is_a_tree_of_rounds_calls_batch_resolutions_and_tools(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "dual_agent")

    spans = session_spans(store, turn.session_id)

    session = one(spans, "session")
    assert session.parent_id is None
    assert {span.trace_id for span in spans} == {session.trace_id}
    turn_span = one(spans, "turn 1")
    assert children(spans, session) == ["turn 1"]
    assert children(spans, turn_span) == ["round 1", "round 2"]
    first = one(spans, "round 1")
    assert children(spans, first)[:2] == [CHAT, "invoke_agent event_agent"]
    assert children(spans, first)[-1] == "policy decision"
    batch = one(spans, "invoke_agent event_agent")
    kids = children(spans, batch)
    assert sorted(k for k in kids if k.startswith("execute_tool")) == [
        "execute_tool calendar.schedule.create",
        "execute_tool device.volume.adjust",
        "execute_tool knowledge.web.search",
    ]
    assert sum(k.startswith("resolve arguments") for k in kids) == 3
    assert children(spans, one(spans, "round 2")) == [CHAT]
    assert len({span.span_id for span in spans}) == len(spans)


@pytest.mark.asyncio
async def test_a_chat_agent_tools_turn_runs_its_tools_under_the_provider_batch(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "chat_agent_tools")

    spans = session_spans(store, turn.session_id)

    batch = one(spans, "provider tools")
    assert one(spans, "round 1").span_id == batch.parent_id
    assert len(children(spans, batch)) == 3
    assert all(name.startswith("execute_tool") for name in children(spans, batch))
    assert not [span for span in spans if span.name.startswith("resolve arguments")]
    tools = [span for span in spans if span.name.startswith("execute_tool")]
    detected = {
        a["details"]["event"]["id"]
        for a in _stored(store, turn.session_id).turns[1]
        if a["event"] == "chat_event_detected"
    }
    assert {span.attributes["gen_ai.tool.call.id"] for span in tools} == detected


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_span_times_are_the_records_offsets_on_the_turns_anchor(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path, mode: str
) -> None:
    turn = await run_turn(client, store, tmp_path, mode)
    stored = _stored(store, turn.session_id)
    anchor = stored.anchors[1]

    spans = turn_spans(stored.record(1))

    def at(details: dict[str, Any]) -> int:
        return anchor + int(details["turn_elapsed_ms"]) * NS_PER_MS

    wall = store.usage_summary(turn.session_id)["turns"][0]["turn_wall_time_ms"]
    turn_span = one(spans, "turn 1")
    assert (turn_span.start_ns, turn_span.end_ns) == (anchor, anchor + wall * NS_PER_MS)
    for index in (1, 2):
        round_span = one(spans, f"round {index}")
        assert round_span.start_ns == at(_audit(stored, "chat_round_started", index))
        assert round_span.end_ns == at(_audit(stored, "chat_round_finished", index))
        chat = next(s for s in by_name(spans, CHAT) if s.parent_id == round_span.span_id)
        assert chat.start_ns == at(_audit(stored, "chat_agent_request", index))
        assert chat.end_ns == at(_audit(stored, "chat_agent_response", index))
    results = _audit(stored, "event_batch_results", 1)["results"]
    latency = {r["event_id"]: r["tool_latency_ms"] for r in results}
    for tool in (s for s in spans if s.name.startswith("execute_tool")):
        call_id = tool.attributes["gen_ai.tool.call.id"]
        assert tool.end_ns - tool.start_ns == latency[call_id] * NS_PER_MS
    batch = next(s for s in spans if s.span_id == tool.parent_id)
    assert batch.start_ns == at(_audit(stored, "event_batch_started", 1))


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_model_calls_carry_genai_attributes_and_the_stored_tokens(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path, mode: str
) -> None:
    turn = await run_turn(client, store, tmp_path, mode)
    calls = store.usage_summary(turn.session_id)["calls"]

    spans = session_spans(store, turn.session_id)

    models = {s.attributes["agent_lab.call.metric_key"]: s for s in by_name(spans, CHAT)}
    stored = {c["metric_key"]: c for c in calls if c["call_kind"] != "tool_execution"}
    assert set(models) == set(stored)
    for key, call in stored.items():
        attrs = models[key].attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "agent-lab-sim"
        assert attrs["gen_ai.usage.input_tokens"] == call["prompt_tokens"]
        assert attrs["gen_ai.usage.output_tokens"] == call["completion_tokens"]
        assert attrs["agent_lab.usage.cached_tokens"] == call["cached_tokens"]
        assert attrs["gen_ai.response.time_to_first_chunk"] == call["ttft_ms"] / 1000
        assert attrs["gen_ai.response.finish_reasons"]
        assert attrs["agent_lab.mode"] == mode
    roles = {key: s.attributes["agent_lab.call.role"] for key, s in models.items()}
    assert roles["chat:1:1"] == "chat" and roles["chat:1:2"] == "follow_up"
    assert _number(models["chat:1:1"].attributes["agent_lab.ttft.visible_ms"]) >= 0
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert {s.attributes["gen_ai.operation.name"] for s in tools} == {"execute_tool"}
    policies = {
        s.attributes["gen_ai.tool.name"]: s.attributes["agent_lab.tool.result_policy"]
        for s in tools
    }
    assert policies == {
        "device.volume.adjust": "silent_success",
        "calendar.schedule.create": "template",
        "knowledge.web.search": "follow_up",
    }
    decision = one(spans, "policy decision")
    assert decision.attributes["agent_lab.policy.llm_follow_up"] is True


@pytest.mark.asyncio
async def test_each_argument_resolution_names_the_resolver_or_its_model_call(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "dual_agent")
    calls = store.usage_summary(turn.session_id)["calls"]
    argument_calls = {c["event_id"]: c for c in calls if c["call_kind"].startswith("argument_")}
    assert argument_calls, "the simulated event agent asks the model for some arguments"

    spans = session_spans(store, turn.session_id)

    for resolution in (s for s in spans if s.name.startswith("resolve arguments")):
        call_id = resolution.attributes["agent_lab.arguments.call_id"]
        kids = [s for s in spans if s.parent_id == resolution.span_id]
        if call_id not in argument_calls:
            assert resolution.attributes["agent_lab.arguments.resolution"] == "resolver"
            assert kids == []
            continue
        call = argument_calls[call_id]
        assert resolution.attributes["agent_lab.arguments.resolution"] == call["call_kind"]
        (model_call,) = kids
        assert model_call.attributes["agent_lab.call.role"] == call["call_kind"]
        assert model_call.attributes["gen_ai.agent.name"] == "event_agent"
        assert model_call.end_ns - model_call.start_ns == call["latency_ms"] * NS_PER_MS
        assert model_call.attributes["gen_ai.usage.input_tokens"] == call["prompt_tokens"]


def _values(spans: list[SpanData]) -> str:
    return json.dumps([[dict(s.attributes), [dict(e.attributes) for e in s.events]] for s in spans])


@pytest.mark.asyncio
async def test_message_content_only_when_capture_is_on_and_never_a_secret(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "dual_agent")

    plain = session_spans(store, turn.session_id)
    captured = session_spans(store, turn.session_id, ConvertOptions(capture_content=True))

    content_keys = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.result")
    assert not [s for s in plain if any(k in s.attributes for k in content_keys)]
    first_chat = next(
        s for s in captured if s.attributes.get("agent_lab.call.metric_key") == "chat:1:1"
    )
    inputs = json.loads(str(first_chat.attributes["gen_ai.input.messages"]))
    assert inputs[-1]["role"] == "user" and "SQLite WAL" in inputs[-1]["parts"][0]["content"]
    search = one(captured, "execute_tool knowledge.web.search")
    assert "SQLite" in str(search.attributes["gen_ai.tool.call.result"])
    assert API_KEY not in _values(captured) and "Bearer" not in _values(captured)


@pytest.mark.asyncio
async def test_cost_is_known_with_a_price_and_unknown_without(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "dual_agent")
    sim = Price(input_per_mtok=Decimal(1), output_per_mtok=Decimal(2))

    priced = session_spans(
        store, turn.session_id, ConvertOptions(prices=price_table({"agent-lab-sim": sim}))
    )
    unpriced = session_spans(store, turn.session_id, ConvertOptions(prices=price_table()))

    chat = next(s for s in priced if s.attributes.get("agent_lab.call.metric_key") == "chat:1:1")
    tokens = chat.attributes
    expected = (
        _number(tokens["gen_ai.usage.input_tokens"]) * 1
        + _number(tokens["gen_ai.usage.output_tokens"]) * 2
    ) / 1e6
    assert chat.attributes["agent_lab.cost.usd"] == pytest.approx(expected)
    turn_cost = one(priced, "turn 1").attributes["agent_lab.cost.usd"]
    model_costs = [_number(s.attributes["agent_lab.cost.usd"]) for s in by_name(priced, CHAT)]
    assert turn_cost == pytest.approx(sum(model_costs))
    assert {s.attributes["agent_lab.cost.status"] for s in by_name(unpriced, CHAT)} == {"unknown"}
    assert "agent_lab.cost.usd" not in one(unpriced, "turn 1").attributes


@pytest.mark.asyncio
async def test_a_turn_cut_short_ends_its_open_spans_with_the_turn_as_errors(
    client: OpenAICompatibleChatClient, store: SQLiteSessionStore, tmp_path: Path
) -> None:
    turn = await run_turn(client, store, tmp_path, "chat_agent_tools")
    stored = _stored(store, turn.session_id)
    audits = stored.turns[1]
    cut = next(i for i, a in enumerate(audits) if a["event"] == "event_batch_started") + 1
    failed = {
        "event": "session_finished",
        "details": {"status": "failed", "turn_elapsed_ms": 9_999},
    }

    spans = turn_spans(stored.record(1, [*audits[:cut], failed]))

    turn_span = one(spans, "turn 1")
    assert turn_span.status == "error"
    assert turn_span.attributes["agent_lab.turn.status"] == "failed"
    for name in ("round 1", "provider tools"):
        span = one(spans, name)
        assert (span.status, span.end_ns) == ("error", turn_span.end_ns)
    assert not [s for s in spans if s.name == "round 2"]


def test_a_turns_anchor_is_its_earliest_write_less_its_offset() -> None:
    rows = [
        {
            "turn_index": 1,
            "details": {"turn_elapsed_ms": 2},
            "created_at": "2026-12-01T09:00:00.502+00:00",
        },
        {
            "turn_index": 1,
            "details": {"turn_elapsed_ms": 10},
            "created_at": "2026-12-01T09:00:01.000+00:00",
        },
        {
            "turn_index": 2,
            "details": {"turn_elapsed_ms": 0},
            "created_at": "2026-12-01T09:01:00.000+00:00",
        },
    ]

    found = anchors(rows)

    base = 1_796_115_600_000 * NS_PER_MS  # 2026-12-01T09:00:00Z
    assert found == {1: base + 500 * NS_PER_MS, 2: base + 60_000 * NS_PER_MS}


def _number(value: object) -> float:
    assert isinstance(value, int | float), value
    return float(value)


@pytest.mark.asyncio
async def test_a_chat_call_cut_short_keeps_what_was_measured_of_it(
    store: SQLiteSessionStore, tmp_path: Path
) -> None:
    """Text, then the stream breaks off with no usage: the chat span still has the
    provider's TTFT and its first-chunk event, the round its visible TTFT, and the turn
    says one call reported no usage (its tokens are not in the total)."""
    words = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello there, "}}]}
    broken = ScriptedResponse.sse(words, done=False, abort=True)
    with SSETranscriptServer(broken) as server:
        async with OpenAICompatibleChatClient(server.base_url, "k", max_retries=0) as cut:
            turn = await run_turn(cut, store, tmp_path, "chat_agent_tools")
    assert turn.outputs[-1]["type"] == "error"

    spans = session_spans(store, turn.session_id)

    chat = one(spans, "chat agent-lab-sim")
    assert isinstance(chat.attributes["agent_lab.ttft.provider_ms"], int)
    assert chat.attributes["agent_lab.usage.reported"] is False
    assert "agent_lab.first_chunk" in [event.name for event in chat.events]
    assert isinstance(one(spans, "round 1").attributes["agent_lab.ttft.visible_ms"], int)
    assert one(spans, "turn 1").attributes["agent_lab.usage.unreported_calls"] == 1
