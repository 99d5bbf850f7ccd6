"""Calls of a cut-off batch are shown as the effect ledger knows them, in headless
Chromium: uncertain where no outcome was recorded (dispatched: "outcome unknown — check
before repeating"; never dispatched: "not executed"), done where a result was; live (the
next turn's ``recovered_calls``) and after a reload (from the store), both for a turn
cancelled in the middle of its tools and for a process killed there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_lab.testing.sse_server import SSETranscriptServer
from tests.record.effect_lab import (
    PROMPT,
    batch_answer,
    blocking_registry,
    crash_mid_batch,
    effect_settings,
)
from tests.record.record_support import answer
from tests.web.test_browser import VIEWPORT, browser, send
from tests.web.test_views_browser import reopened, settled
from tests.web.web_support import ServedLab, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]
MODES = ["dual_agent", "chat_agent_tools"]
UNKNOWN = "uncertain: outcome unknown — check before repeating"
NOT_EXECUTED = "uncertain: not executed"
RAN = "done (recorded before the interruption)"
CALLS = """() => [...document.querySelectorAll('#messages .turn[data-turn="1"] .call')].map((c) =>
  [c.querySelector('.call-name').textContent, c.dataset.status, c.dataset.recovered || '',
   c.querySelector('.call-status').textContent])"""


@pytest.fixture
def model() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer() as server:
        yield server


def open_lab(browser: Browser, lab: ServedLab, errors: list[str]) -> Page:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    return page


def first_turn_calls(page: Page) -> list[list[str]]:
    calls: list[list[str]] = page.evaluate(CALLS)
    return calls


CANCELLED = [  # the dispatched call may have run; the other never did: neither is done
    ["door.lock", "uncertain", "unknown", UNKNOWN],
    ["lights.on", "uncertain", "not_executed", NOT_EXECUTED],
]
KILLED = [  # the first call's result was recorded; the second was running
    ["door.lock", "done", "succeeded", RAN],
    ["lights.on", "uncertain", "unknown", UNKNOWN],
]


def assert_recovered(page: Page, expected: list[list[str]]) -> None:
    """Turn 1's calls as the effect ledger knows them; turn 2 says it reported them."""
    assert first_turn_calls(page) == expected
    notice = page.locator('.turn[data-turn="2"] .notice.recovered')
    for name, _, _, text in expected:
        expect(notice).to_contain_text(f"{name} (turn 1) {text}")


def second_turn_done(page: Page) -> None:
    expect(page.locator('.turn[data-turn="2"] .stats')).to_have_count(1, timeout=30_000)
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)


@pytest.mark.parametrize("mode", MODES)
def test_a_turn_cancelled_mid_batch_shows_its_calls_uncertain_live_and_reopened(
    browser: Browser, model: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    model.add(batch_answer(mode), answer("The door may be locked; shall I check?"))
    started = threading.Event()
    errors: list[str] = []
    settings = effect_settings(tmp_path / "home", model.base_url, mode)
    with served(settings, registry=blocking_registry(started)) as lab:
        page = open_lab(browser, lab, errors)
        page.check(f"input[name=mode][value={mode}]", force=True)
        send(page, PROMPT)
        assert started.wait(30), "the first tool never ran"
        page.click("#cancel-turn")
        expect(page.locator(".msg.error")).to_have_count(1, timeout=30_000)
        expect(page.locator("#status")).to_have_text("live", timeout=30_000)

        send(page, "Did it work?")
        second_turn_done(page)
        assert_recovered(page, CANCELLED)
        live = settled(page)

        after = reopened(page)

        assert after == live
        assert_recovered(page, CANCELLED)
        page.context.close()
    assert errors == []


@pytest.mark.parametrize("mode", MODES)
def test_a_process_killed_mid_batch_shows_its_calls_uncertain_live_and_reopened(
    browser: Browser, model: SSETranscriptServer, tmp_path: Path, mode: str
) -> None:
    model.add(batch_answer(mode), answer("The door may be locked; shall I check?"))
    settings = effect_settings(tmp_path / "home", model.base_url, mode)
    settings.lab_home().mkdir(parents=True, exist_ok=True)
    crash_mid_batch(settings.database(), model.base_url, mode, "crashed")
    errors: list[str] = []
    with served(settings, registry=blocking_registry(threading.Event())) as lab:
        page = open_lab(browser, lab, errors)
        page.evaluate("() => sessionStorage.setItem('agentlab.session', 'crashed')")
        page.reload()
        expect(page.locator('.turn[data-turn="1"] .call')).to_have_count(2, timeout=20_000)
        expect(page.locator("#status")).to_have_text("ready to continue")

        send(page, "Did it work?")
        # Turn 2 closes the turn the killed process left open, live as in the store.
        expect(page.locator('.turn[data-turn="1"] .msg.error')).to_contain_text("interrupted")
        second_turn_done(page)
        assert_recovered(page, KILLED)
        live = settled(page)

        after = reopened(page)

        assert after == live
        assert_recovered(page, KILLED)
        first: dict[str, Any] = after[0]
        assert any("interrupted" in error for error in first["errors"])
        page.context.close()
    assert errors == []
