"""Costs from usage: the pure model, the genai-prices table and config overrides."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.pricing import (
    CallCost,
    CostSum,
    OverriddenPrices,
    Price,
    PriceTable,
    PriceTier,
    cost_breakdown,
    cost_of,
    format_usd,
)
from agent_lab.application.session_store import CallMetric
from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.prices import (
    GenaiPriceTable,
    load_price_overrides,
    price_overrides,
    price_table,
)

MTOK = 1_000_000


class Fixed:
    """A price table that knows exactly the given models."""

    def __init__(self, **prices: Price) -> None:
        self.prices = prices

    def price_of(self, model: str) -> Price | None:
        return self.prices.get(model)


CHEAP = Price(input_per_mtok=Decimal("1"), output_per_mtok=Decimal("4"), cached_input_per_mtok=None)
CACHED = Price(
    input_per_mtok=Decimal("2"), output_per_mtok=Decimal("8"), cached_input_per_mtok=Decimal("0.5")
)


def metric(key: str, **fields: Any) -> dict[str, Any]:
    """A call as ``usage_summary()["calls"]`` returns it (a dict with ``created_at``)."""
    kind = key.split(":")[0]
    call_kind = {"fallback": "argument_fallback", "generation": "argument_generation"}
    call_kind |= {"tool": "tool_execution"}
    agent = {"chat": "chat_agent", "tool": "tool"}.get(kind, "event_agent")
    parts = key.split(":")
    return {
        "metric_key": key,
        "turn_index": int(parts[1]),
        "round_index": int(parts[2]),
        "call_kind": call_kind.get(kind, kind),
        "agent": agent,
        "mode": "dual_agent",
        "model": None if kind == "tool" else "cheap",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cached_tokens": 0,
        "usage_reported": kind != "tool",
        "created_at": "2026-07-13T12:00:00Z",
        **fields,
    }


# --- the pure model ----------------------------------------------------------------


def test_cached_tokens_are_billed_at_the_cached_rate() -> None:
    cost = CACHED.cost(prompt_tokens=1000, completion_tokens=100, cached_tokens=600)
    assert cost == (Decimal(400 * 2) + Decimal(600) * Decimal("0.5") + Decimal(100 * 8)) / MTOK


def test_cached_tokens_without_a_cached_rate_are_billed_as_input() -> None:
    assert CHEAP.cost(1000, 0, cached_tokens=600) == CHEAP.cost(1000, 0) == Decimal(1000) / MTOK


def test_a_long_prompt_pays_the_tier_rate_for_every_token() -> None:
    tiered = Price(
        input_per_mtok=Decimal(1),
        output_per_mtok=Decimal(2),
        tiers=(PriceTier(above=200_000, input_per_mtok=Decimal(3), output_per_mtok=Decimal(4)),),
    )
    assert tiered.cost(200_000, 10) == (Decimal(200_000) + Decimal(20)) / MTOK
    assert tiered.cost(200_001, 10) == (Decimal(200_001 * 3) + Decimal(40)) / MTOK


def test_breakdown_sums_per_round_turn_and_session_split_by_role() -> None:
    calls = [
        metric("chat:1:1", prompt_tokens=1000, completion_tokens=100),
        metric("fallback:1:1:evt_a", prompt_tokens=500, completion_tokens=20),
        metric("tool:1:1:evt_a", tool_latency_ms=3, status="succeeded"),
        metric("chat:1:2", prompt_tokens=2000, completion_tokens=50, cached_tokens=1000),
        metric("generation:2:1:evt_b", prompt_tokens=300, completion_tokens=30),
        metric("chat:2:1", prompt_tokens=100, completion_tokens=10),
    ]
    breakdown = cost_breakdown(calls, Fixed(cheap=CHEAP))

    def usd(prompt: int, completion: int) -> Decimal:
        return (Decimal(prompt) + Decimal(4 * completion)) / MTOK

    assert [c.metric_key for c in breakdown.calls] == [
        "chat:1:1",
        "fallback:1:1:evt_a",
        "chat:1:2",
        "generation:2:1:evt_b",
        "chat:2:1",
    ]
    round_one = breakdown.round(1, 1)
    assert round_one.total.amount == usd(1000, 100) + usd(500, 20)
    assert round_one.by_role["chat"].amount == usd(1000, 100)
    assert round_one.by_role["argument_fallback"].amount == usd(500, 20)
    assert round_one.by_role["argument_generation"] == CostSum()
    assert breakdown.turn(1).total.amount == usd(1000, 100) + usd(500, 20) + usd(2000, 50)
    assert breakdown.turn(2).by_role["argument_generation"].amount == usd(300, 30)
    session = breakdown.session
    assert session.total.amount == sum(
        (c.amount or Decimal(0) for c in breakdown.calls), Decimal(0)
    )
    assert session.by_role["chat"].amount == usd(1000, 100) + usd(2000, 50) + usd(100, 10)
    assert session.total.priced_calls == 5 and session.total.unpriced_calls == 0
    assert (
        sum((s.amount or Decimal(0) for s in session.by_role.values()), Decimal(0))
        == session.total.amount
    )
    assert breakdown.currency == "USD"


def test_unpriced_model_is_unknown_never_zero() -> None:
    calls = [
        metric("chat:1:1", prompt_tokens=1000, completion_tokens=100),
        metric("chat:1:2", model="mystery-model", prompt_tokens=1000, completion_tokens=100),
    ]
    breakdown = cost_breakdown(calls, Fixed(cheap=CHEAP))

    unknown = breakdown.calls[1]
    assert unknown.amount is None and unknown.unknown_reason == "unpriced_model"
    assert breakdown.round(1, 2).total.amount is None
    assert breakdown.session.total.amount is None
    assert breakdown.session.total.known == CHEAP.cost(1000, 100)
    assert breakdown.session.total.describe() == "≥ $0.00140 (1 call unpriced)"
    assert breakdown.round(1, 2).total.describe() == "unknown"


def test_live_figures_are_priced_or_unknown() -> None:
    table = Fixed(cheap=CACHED)
    live = cost_of(table, "cheap", prompt_tokens=1000, completion_tokens=100, cached_tokens=600)
    assert live == CACHED.cost(1000, 100, 600)
    assert cost_of(table, "other", prompt_tokens=1000, completion_tokens=100) is None
    assert cost_of(table, None, prompt_tokens=1000, completion_tokens=100) is None


def test_a_call_without_reported_usage_is_unknown_even_when_priced() -> None:
    [cost] = cost_breakdown([metric("chat:1:1", usage_reported=False)], Fixed(cheap=CHEAP)).calls
    assert (cost.amount, cost.unknown_reason) == (None, "no_usage_reported")


def test_breakdown_accepts_call_metric_objects() -> None:
    record = CallMetric.model_validate(metric("chat:3:1", prompt_tokens=10, completion_tokens=1))
    [cost] = cost_breakdown([record], Fixed(cheap=CHEAP)).calls
    assert cost == CallCost(
        "chat:3:1", 3, 1, "chat", "cheap", CHEAP.cost(10, 1), CHEAP, unknown_reason=None
    )


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (None, "unknown"),
        (Decimal(0), "$0"),
        (Decimal("0.0000234567"), "$0.0000235"),
        (Decimal("0.0123"), "$0.0123"),
        (Decimal("1.2345"), "$1.23"),
        (Decimal("321.5"), "$321.50"),
    ],
)
def test_format_usd(amount: Decimal | None, text: str) -> None:
    assert format_usd(amount) == text


# --- the genai-prices table ----------------------------------------------------------


def test_known_model_is_priced_from_the_bundled_data() -> None:
    table = GenaiPriceTable()
    price = table.price_of("gpt-4o-mini")

    assert price is not None
    assert price.input_per_mtok > 0 and price.output_per_mtok > price.input_per_mtok
    assert price.cached_input_per_mtok is not None
    assert price.cached_input_per_mtok < price.input_per_mtok
    assert price.source.startswith("genai-prices ") and price.source.endswith("openai/gpt-4o-mini")
    assert table.price_of("openai/gpt-4o-mini") == price
    assert table.price_of("GPT-4o-mini-2024-07-18") == price


def test_library_costs_agree_with_the_library_calculation() -> None:
    from genai_prices import Usage, calc_price

    price = GenaiPriceTable().price_of("gpt-4o")
    assert price is not None
    expected = calc_price(
        Usage(input_tokens=12_000, cache_read_tokens=8_000, output_tokens=700), "gpt-4o"
    ).total_price
    assert price.cost(12_000, 700, cached_tokens=8_000) == expected


def test_tiered_library_price_keeps_its_tiers() -> None:
    from genai_prices import Usage, calc_price

    price = GenaiPriceTable().price_of("gemini-2.5-pro")
    assert price is not None and price.tiers
    for prompt in (1_000, 300_000):
        usage = Usage(input_tokens=prompt, output_tokens=1_000)
        assert price.cost(prompt, 1_000) == calc_price(usage, "gemini-2.5-pro").total_price


def test_the_endpoint_picks_the_provider() -> None:
    via_router = GenaiPriceTable(base_url="https://openrouter.ai/api/v1")
    price = via_router.price_of("openai/gpt-4o-mini")
    assert price is not None and price.source.endswith("openrouter/openai/gpt-4o-mini")
    local = GenaiPriceTable(base_url="http://127.0.0.1:8765/v1").price_of("gpt-4o-mini")
    assert local is not None and local.source.endswith("openai/gpt-4o-mini")


def test_unknown_model_has_no_price() -> None:
    table = GenaiPriceTable()
    assert table.price_of("agent-lab-sim") is None
    assert table.price_of("someone/unheard-of-model") is None


def test_lookups_never_reach_the_network() -> None:
    """A fresh process with every connection refused still loads and prices."""
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise SystemExit("the price table opened a connection")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from agent_lab.infrastructure.prices import GenaiPriceTable

        table = GenaiPriceTable()
        table.load()
        price = table.price_of("claude-3-5-sonnet")
        assert price is not None and price.input_per_mtok > 0, price
        print("priced offline")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "priced offline"), done.stderr


# --- overrides --------------------------------------------------------------------------


def test_overrides_win_over_the_library_and_price_unknown_models(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(
        '[prices."gpt-4o-mini"]\n'
        "input_per_mtok = 0.10\noutput_per_mtok = 0.40\ncached_input_per_mtok = 0.01\n"
        '[prices."agent-lab-sim"]\ninput_per_mtok = 0\noutput_per_mtok = 0\n',
        encoding="utf-8",
    )
    table: PriceTable = price_table(load_price_overrides(config))

    mini = table.price_of("gpt-4o-mini")
    assert mini == Price(
        input_per_mtok=Decimal("0.10"),
        output_per_mtok=Decimal("0.40"),
        cached_input_per_mtok=Decimal("0.01"),
        source="config",
    )
    assert mini.cost(1000, 0, cached_tokens=1000) == Decimal("0.00001")
    assert table.price_of("AGENT-LAB-SIM") is not None  # names compare case-insensitively
    library = table.price_of("gpt-4o")
    assert library is not None and library.source.startswith("genai-prices")
    assert table.price_of("unheard-of") is None


def test_overrides_under_agent_lab_section() -> None:
    overrides = price_overrides(
        {"agent_lab": {"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 2}}}}
    )
    assert overrides["m"].cached_input_per_mtok is None
    assert OverriddenPrices(overrides).price_of("m") == overrides["m"]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"prices": {"m": {"input_per_mtok": 1}}}, 'prices."m": output_per_mtok: Field required'),
        ({"prices": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}, "greater than or equal"),
        ({"prices": {"m": {"input_mtok": 1, "output_per_mtok": 1}}}, "input_mtok: Extra inputs"),
        ({"prices": {"m": 3}}, 'prices."m" must be a table'),
        ({"prices": 3}, "prices must be a table"),
    ],
)
def test_malformed_overrides_are_config_errors(config: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace(".", r"\.").replace('"', '"')):
        price_overrides(config)


def test_one_config_file_holds_the_settings_and_the_prices(tmp_path: Path) -> None:
    from agent_lab.interfaces.settings import load_settings

    config = tmp_path / "lab.toml"
    config.write_text(
        '[agent_lab]\nmodel = "gpt-4o-mini"\n\n'
        '[prices."gpt-4o-mini"]\ninput_per_mtok = 0.12\noutput_per_mtok = 0.48\n',
        encoding="utf-8",
    )
    settings = load_settings(config_file=config, environ={})
    overrides = load_price_overrides(config)

    assert settings.model == "gpt-4o-mini"
    assert overrides["gpt-4o-mini"].input_per_mtok == Decimal("0.12")
