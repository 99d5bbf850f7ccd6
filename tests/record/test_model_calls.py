"""Every model call in the record: its role, the request as sent (by reference), its
timings split by phase, its usage, its cost from a price table (unknown, never zero,
when unpriced) and whether it was cold."""

from __future__ import annotations

import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from record_support import (
    BUILTIN_TOOLS,
    answer,
    assert_same_records,
    reopened,
    request,
    run_once,
)

from agent_lab.application.pricing import OverriddenPrices, Price
from agent_lab.application.record import LiveRecords, request_sent
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.simulator.provider import SimulatedProviderServer
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.testing import ScriptedChatClient, text
from agent_lab.testing.sse_server import SSETranscriptServer

SIM_PRICE = Price(input_per_mtok=Decimal("1.5"), output_per_mtok=Decimal("6"))


@pytest.mark.asyncio
async def test_calls_have_roles_requests_usage_and_cost(
    simulator: SimulatedProviderServer, tmp_path: Path
) -> None:
    prices = OverriddenPrices({"agent-lab-sim": SIM_PRICE})
    database = tmp_path / "sessions.sqlite3"
    registry = build_default_tool_registry(local_backends(tmp_path))
    outputs, live, session_id = await run_once(
        simulator.base_url, database, request("dual_agent", BUILTIN_TOOLS), registry, prices=prices
    )

    [record] = live.records()
    roles = [(c.metric_key.split(":")[0], c.role) for c in record.model_calls]
    assert roles == [("chat", "chat"), ("generation", "argument_generation"), ("chat", "follow_up")]
    requests = [o["details"] for o in outputs if o.get("event") == "chat_agent_request"]
    chat_calls = [c for c in record.model_calls if c.metric_key.startswith("chat:")]
    with SQLiteSessionStore(database) as store:
        stored_audits = store.list_audit_logs(session_id)
    for call, sent in zip(chat_calls, requests, strict=True):
        assert call.request is not None
        assert record.entries[call.request.audit_seq - 1].event == "chat_agent_request"
        assert call.request.message_count == len(sent["messages"])
        stored = request_sent(stored_audits, record.turn_index, call.request)
        assert stored["messages"] == sent["messages"]
    argument_call = record.model_calls[1]
    assert argument_call.request is not None
    forced = request_sent(stored_audits, record.turn_index, argument_call.request)
    assert argument_call.request.message_count == len(forced["history"]) + 1
    assert "system_prompt" in forced
    for call in record.model_calls:
        assert call.usage is not None
        expected = SIM_PRICE.cost(call.usage.prompt_tokens, call.usage.completion_tokens)
        assert call.cost.amount_usd == expected and expected > 0
        assert call.cost.price_source == "config"
    cost = record.cost
    assert cost.total_usd == sum((c.cost.amount_usd or Decimal(0)) for c in record.model_calls)
    generation = record.model_calls[1].cost.amount_usd
    assert cost.by_role["argument_generation"] == generation
    assert cost.by_role["follow_up"] == record.model_calls[2].cost.amount_usd
    assert cost.by_role["argument_fallback"] == Decimal(0)
    [back] = reopened(database, session_id, prices=prices)
    assert back == record


@pytest.mark.asyncio
async def test_an_unpriced_model_costs_unknown_never_zero(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(answer("Hello."))
    prices = OverriddenPrices({"some-other-model": SIM_PRICE})
    _, live, _ = await run_once(
        sse_server.base_url,
        tmp_path / "s.sqlite3",
        request("dual_agent", [], "hi", model="my-finetune"),
        ToolRegistry(),
        prices=prices,
    )

    [record] = live.records()
    [call] = record.model_calls
    assert call.cost.amount_usd is None
    assert call.cost.unknown_reason == "unpriced_model"
    assert record.cost.total_usd is None and record.cost.unpriced_calls == 1
    assert record.cost.by_role["chat"] is None


class _GatedWarmUp(OpenAICompatibleChatClient):
    """The real client, whose warm-up finishes only once a call waits for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.gate = threading.Event()
        super().__init__(*args, **kwargs)

    def _warm(self) -> None:
        self.gate.wait(30)
        super()._warm()

    async def _await_warm(self) -> None:
        self.gate.set()
        await super()._await_warm()


@pytest.mark.asyncio
async def test_client_warm_up_is_recorded_apart_and_never_counted_as_ttft(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(answer("One."), answer("Two."))
    database = tmp_path / "s.sqlite3"
    live = LiveRecords()
    async with _GatedWarmUp(sse_server.base_url, max_retries=0) as client:
        with SQLiteSessionStore(database) as store:
            runtime = DebugRuntime(client, registry=ToolRegistry(), session_store=store)
            async with runtime.session(request("dual_agent", [], "first")) as session:
                async for output in session:
                    live.feed(output)
                    if output["type"] == "turn_completed":
                        break
                await session.send("second")
                await session.close()
                async for output in session:
                    live.feed(output)
            session_id = store.list_sessions()[0]["id"]
            calls = {c["metric_key"]: c for c in store.usage_summary(session_id)["calls"]}

    assert_same_records(live.records(), reopened(database, session_id))
    first, second = (record.model_calls[0] for record in live.records())
    assert first.cold is True
    assert first.cold_reasons == ["client_warm_up", "first_call_of_client"]
    assert first.timings.warmup_ms is not None and first.timings.warmup_ms > 0
    assert first.timings.connect_ms is not None
    # The provider's TTFT (persisted too) is the client's first-chunk time, which
    # starts after the warm-up.
    assert first.timings.provider_first_chunk_ms is not None
    assert calls["chat:1:1"]["ttft_ms"] == round(first.timings.provider_first_chunk_ms)
    assert second.cold is False and second.cold_reasons == []
    assert second.timings.warmup_ms == 0.0


@pytest.mark.asyncio
async def test_timings_a_client_does_not_report_are_none(tmp_path: Path) -> None:
    client = ScriptedChatClient([text("Hello.")])
    live = LiveRecords()
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(client, registry=ToolRegistry(), session_store=store)
        async for output in runtime.run(request("dual_agent", [], "hi")):
            live.feed(output)

    [call] = live.records()[0].model_calls
    timings = call.timings
    assert (timings.warmup_ms, timings.connect_ms, timings.attempts) == (None, None, None)
    assert timings.provider_first_chunk_ms is not None  # measured by the runtime
    assert call.cold_reasons == ["first_call_of_client"]
    assert call.usage is None and call.cost.amount_usd is None
