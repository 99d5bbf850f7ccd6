"""The web lab writes usage and cost as the CLI does (headless Chromium, a real server and
a real SSE provider): a call whose provider sent no usage reads "not reported", never a
measured 0, a total some calls did not report says how many, live and reopened, in the
conversation, the timeline, Sessions and Compare; and every cost is written as
``format_usd()`` writes it (three significant digits, at least cents, ``unknown``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from agent_lab.application.pricing import Price, format_usd
from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.test_browser import browser, lab_page, send, wait_turn_done
from tests.web.test_live_tokens_browser import RECORD_HEADER, delta, orders_registry, tool_call
from tests.web.web_support import ServedLab, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]

# Per million tokens: what a small hosted model costs, so a turn costs a few micro-dollars.
PRICE = Price(
    input_per_mtok=Decimal("0.02"),
    cached_input_per_mtok=Decimal("0.01"),
    output_per_mtok=Decimal("0.05"),
)
GREETING_COST = "$0.0000166"  # 600 input + 401 cached + 11 output tokens
LOOKUP_COST = "$0.00000250"  # 100 input + 10 output tokens


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    details = {"prompt_tokens_details": {"cached_tokens": cached}}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion, **details}}


def done() -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


ANSWERS = [
    # session A, turn 1: one call that reports usage
    ScriptedResponse.sse(delta("Hello there."), usage(1001, 11, cached=401)),
    # turn 2: one call whose provider sends no usage at all
    ScriptedResponse.sse(delta("Quiet."), done()),
    # turn 3: the tool call reports usage, its follow-up does not
    ScriptedResponse.sse(delta("Checking. "), tool_call("call-1"), usage(100, 10)),
    ScriptedResponse.sse(delta("It shipped."), done()),
    # session B, turn 1: every call reports usage
    ScriptedResponse.sse(delta("Hello again."), usage(1001, 11, cached=401)),
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ServedLab]:
    with SSETranscriptServer(*ANSWERS) as model:
        settings = LabSettings(
            home=tmp_path / "home",
            base_url=model.base_url,
            model="scripted",
            max_retries=0,
            tools=["orders.lookup"],
            prices={"scripted": PRICE},
        )
        with served(settings, registry=orders_registry()) as served_lab:
            yield served_lab


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab, RECORD_HEADER)


def chip(root: Locator, label: str) -> Locator:
    return root.locator(f'.chip:has(b:text-is("{label}"))')


def round_chips(page: Page, turn: int, round_index: int) -> Locator:
    return page.locator(f'.turn[data-turn="{turn}"] .round').nth(round_index - 1).locator(".stats")


def expect_conversation(page: Page) -> None:
    """Session A's round chips and header (the same live and reopened)."""
    quiet = round_chips(page, 2, 1)
    expect(chip(quiet, "chat tokens")).to_have_text("chat tokens not reported")
    expect(chip(quiet, "cached")).to_have_count(0)
    header = page.locator("#conv-usage")
    expect(header).to_contain_text("1,122 tokens · 2 calls not reported")
    expect(chip(round_chips(page, 3, 2), "chat tokens")).to_have_text("chat tokens not reported")
    expect(chip(quiet, "cost")).to_have_text("cost unknown")
    first = round_chips(page, 1, 1)
    expect(chip(first, "chat tokens")).to_have_text(re.compile(r"chat tokens\s+1,012$"))
    expect(chip(first, "cached")).to_have_text(re.compile(r"cached\s+401$"))
    expect(chip(first, "cost")).to_have_text(f"cost {GREETING_COST}")
    expect(chip(round_chips(page, 3, 1), "chat tokens")).to_have_text(re.compile(r"\s110$"))
    expect(chip(round_chips(page, 3, 1), "cost")).to_have_text(f"cost {LOOKUP_COST}")
    expect(chip(round_chips(page, 3, 2), "cost")).to_have_text("cost unknown")
    tokens = header.locator("[data-figure=tokens]")
    expect(tokens).to_have_text("1,122 tokens · 2 calls not reported")


def expect_timeline(page: Page) -> None:
    """Session A's turn summaries in the Timeline tab."""
    page.click(".tab[data-view=timeline]")
    summary = page.locator(".turn-summary")
    shown = {
        "2": ("not reported", "not reported", "unknown"),
        "3": ("110 · 1 call not reported", "0", "unknown"),
        "1": ("1,012", "401", GREETING_COST),
    }
    for turn, (tokens, cached, cost) in shown.items():
        page.select_option("#timeline-turn", turn)
        expect(summary.locator(".turn-user")).not_to_be_empty()
        expect(chip(summary, "tokens")).to_have_text(f"tokens {tokens}")
        expect(chip(summary, "cached")).to_have_text(f"cached {cached}")
        expect(chip(summary, "cost")).to_have_text(f"cost {cost}")
    page.click(".tab[data-view=lab]")


def run_session_a(page: Page) -> None:
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    send(page, "First hello")
    wait_turn_done(page, 1)
    send(page, "Quiet please")
    wait_turn_done(page, 2)
    send(page, "Where is order A-17?")
    wait_turn_done(page, 4)
    expect(page.locator("#conv-usage")).to_contain_text("3 turns")


def test_unreported_usage_reads_not_reported_live_and_reopened(page: Page) -> None:
    run_session_a(page)
    expect_conversation(page)
    headers: list[str] = page.evaluate("() => window.__header")
    # while turn 2 ran: nothing reported; while turn 3 ran: one call of two reported
    assert any("turn 2 running" in text and "tokens not reported" in text for text in headers)
    assert any("110 tokens so far · 1 call not reported" in text for text in headers), headers
    assert not any(re.search(r"\b0 tokens", text) for text in headers), headers
    expect_timeline(page)

    page.reload()
    expect(page.locator("#messages .msg.user")).to_have_count(3, timeout=20_000)
    expect_conversation(page)
    expect_timeline(page)


def test_sessions_and_compare_mark_unreported_usage_and_write_costs(page: Page) -> None:
    run_session_a(page)
    page.click("#new-session")
    send(page, "Other session hello")
    wait_turn_done(page, 1)
    expect(page.locator("#conv-usage")).to_contain_text("1,012 tokens")

    page.click(".tab[data-view=sessions]")
    partial = page.locator("#sessions-body tr", has_text="First hello")
    whole = page.locator("#sessions-body tr", has_text="Other session hello")
    tokens, cached = 4, 5  # the Tokens and Cached columns
    expect(partial.locator("td").nth(tokens)).to_have_text("1,122 · 2 calls not reported")
    expect(whole.locator("td").nth(tokens)).to_have_text("1,012")
    expect(whole.locator("td").nth(cached)).to_have_text("401")
    expect(partial.locator("[data-figure=cost]")).to_have_text("unknown")
    expect(whole.locator("[data-figure=cost]")).to_have_text(GREETING_COST)
    ids = [row.get_attribute("data-session") for row in (partial, whole)]

    page.click(".tab[data-view=compare]")
    expect(page.locator("#compare-a option")).to_have_count(3)
    page.select_option("#compare-a", ids[0])
    page.select_option("#compare-b", ids[1])
    column_a, column_b = page.locator("#compare-col-a"), page.locator("#compare-col-b")
    metric = '.metric:has(.metric-label:text-is("{}")) .metric-value'
    expect(column_a.locator(metric.format("tokens"))).to_have_text("1,122 · 2 calls not reported")
    expect(column_a.locator(metric.format("cost"))).to_have_text("unknown")
    expect(column_b.locator(metric.format("tokens"))).to_have_text("1,012")
    expect(column_b.locator(metric.format("cost"))).to_have_text(GREETING_COST)
    rows = column_a.locator(".turn-table tbody tr")
    expect(rows.nth(0).locator("td").nth(5)).to_have_text("1,012")
    expect(rows.nth(0).locator("td").last).to_have_text(GREETING_COST)
    expect(rows.nth(1).locator("td").nth(5)).to_have_text("not reported")
    expect(rows.nth(1).locator("td").last).to_have_text("unknown")
    expect(rows.nth(2).locator("td").nth(5)).to_have_text("110 · 1 call not reported")
    # turn 1 reported usage on both sides; turn 2 of A did not: no delta over it
    expect(column_b.locator(".deltas")).to_contain_text("tokens ±0")
    page.select_option("#compare-b", ids[0])
    page.select_option("#compare-turn", "2")
    expect(column_b.locator(".deltas")).to_contain_text("tokens – (not reported)")


# Decimal strings (the exports' and the turn records' form) and JSON numbers (REST).
STRINGS = [
    "0.0024675",
    "0.0011915",
    "0.0000235",
    "0.0123",
    "1.23",
    "0.00000771",
    "0.0000497",
    "4.968e-05",
    "0.0009995",
    "0.0009985",
    "0.001255",
    "0.001245",
    "1234.565",
    "1234.575",
    "9.995",
    "999.995",
    "0.0199999",
    "2",
    "10",
    "1E+1",
    "0",
    "0.000",
    "-0",
    "-0.00123",
    "0.5",
    "0.0005",
    "1e-12",
    "0.00000000123456",
    "123456789.999",
]
NUMBERS = [
    0.0024675,
    4.968e-05,
    2.427e-05,
    0.1 + 0.2,
    1e-07,
    0.0008225,
    0.001645,
    0.000369,
    12.345,
    1 / 3,
    2 / 3,
    123.456,
    0.0,
    1e21,
]
FORMAT = """async (values) => {
  const { usd } = await import("/static/figures.js");
  return values.map((value) => usd(value));
}"""


def test_the_page_writes_dollars_as_format_usd_does(page: Page) -> None:
    shown: list[str] = page.evaluate(FORMAT, [*STRINGS, *NUMBERS, None])
    expected = [format_usd(Decimal(text)) for text in STRINGS]
    expected += [format_usd(Decimal(repr(value))) for value in NUMBERS]
    assert shown == [*expected, "unknown"], json.dumps(list(zip(shown, expected, strict=False)))
    assert shown[:3] == ["$0.00247", "$0.00119", "$0.0000235"]
