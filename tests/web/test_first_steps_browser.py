"""What a new user meets first, in headless Chromium against a real server: a refused
first message stays said, a sent message is scrolled into view, the event budget notice
survives a reload, the endpoint and key typed for a session stay with it, and the page
is usable by keyboard, with right-to-left text and at 1280 px."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from websockets.sync.client import connect

from agent_lab.interfaces.web import WebOptions
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.test_browser import CHROMIUM_ARGS, browser, send, wait_turn_done
from tests.web.test_browser_checks import open_page
from tests.web.test_hardening import chat_reply, frames_until, lab_of, of_type
from tests.web.web_support import ServedLab, lab_settings, served, start_message

pytestmark = pytest.mark.browser
__all__ = ["CHROMIUM_ARGS", "browser"]  # fixtures shared with test_browser
SECRET = "sk-typed-SECRET-9d41c7e2"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("first-steps-lab")
    with served(lab_settings(home, simulated_ttft_ms=20, simulated_tokens_per_second=800)) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    page = open_page(browser, lab)
    yield page
    page.context.close()


def open_stored(page: Page, session_id: str) -> None:
    page.click(".tab[data-view=sessions]")
    page.locator(f"#sessions-body tr[data-session='{session_id}'] button", has_text="Open").click()
    expect(page.locator("#status")).not_to_have_text("connecting…")


def session_id(page: Page) -> str:
    """The id of the session the page shows."""
    return str(page.evaluate("sessionStorage.getItem('agentlab.session')"))


def test_a_first_message_refused_by_the_rate_limit_stays_said_and_comes_back(
    browser: Browser, lab_home: Path
) -> None:
    options = WebOptions(rate_burst=1, rate_per_second=0.001)
    with served(lab_settings(lab_home), options=options) as srv:
        page = open_page(browser, srv)
        send(page, "Set the volume to 20")  # the one message the bucket allows
        wait_turn_done(page, 1)
        page.click("#new-session")
        send(page, "Set the volume to 30")
        error = page.locator("#composer-input-error")
        expect(error).to_contain_text("Not sent: rate limit")
        expect(page.locator("#composer-input")).to_have_value("Set the volume to 30")
        expect(page.locator("#status")).to_have_text("not started")
        page.wait_for_timeout(4500)  # longer than a toast stays
        expect(error).to_be_visible()
        page.context.close()


def test_a_sent_message_is_scrolled_into_view_even_after_scrolling_up(page: Page) -> None:
    lines = "\n".join(f"line {n}" for n in range(12))
    for turn in range(1, 5):
        send(page, f"Set the volume to {turn * 10}\n{lines}")
        wait_turn_done(page, turn)
    messages = page.locator("#messages")
    messages.evaluate("el => { el.scrollTop = 0; }")
    send(page, f"Set the volume to 55\n{lines}")
    wait_turn_done(page, 5)
    last = page.locator(".msg.user").nth(4)
    box, view = last.bounding_box(), messages.bounding_box()
    assert box is not None and view is not None
    assert box["y"] < view["y"] + view["height"] and box["y"] + box["height"] > view["y"]


def test_the_event_budget_notice_is_shown_again_after_a_reload(page: Page) -> None:
    page.fill("#max-event-loops", "1")
    send(page, "Search for sqlite wal and set the volume to 20")
    wait_turn_done(page, 2)
    notice = page.locator(".notice", has_text="Event budget used up: round 2")
    expect(notice).to_have_count(1)
    page.reload()
    expect(page.locator(".stats")).to_have_count(2)
    expect(notice).to_have_count(1)
    expect(page.locator(".turn[data-turn='1'] .round").nth(1).locator(".notice")).to_have_count(1)


def test_endpoint_and_key_stay_with_the_session_they_were_typed_for(
    browser: Browser, lab: ServedLab
) -> None:
    provider = SSETranscriptServer(chat_reply("one"), chat_reply("two"), chat_reply("three"))
    with provider:
        page = open_page(browser, lab)
        page.fill("#base-url", provider.base_url)
        page.fill("#api-key", SECRET)
        send(page, "hello")
        wait_turn_done(page, 1)
        own = session_id(page)
        page.click("#new-session")
        expect(page.locator("#base-url")).to_have_value(provider.base_url)  # still shown
        page.fill("#base-url", "")
        page.fill("#api-key", "")
        send(page, "Set the volume to 20")
        wait_turn_done(page, 1)
        server_default = session_id(page)

        open_stored(page, own)
        expect(page.locator("#base-url")).to_have_value(provider.base_url)
        expect(page.locator("#api-key")).to_have_value(SECRET)
        send(page, "again")  # continues on its own endpoint, with its key
        wait_turn_done(page, 2)
        open_stored(page, server_default)
        expect(page.locator("#base-url")).to_have_value("")
        expect(page.locator("#api-key")).to_have_value("")
        expect(page.locator("#connection-note")).to_contain_text("stay with session")
        open_stored(page, own)
        expect(page.locator("#api-key")).to_have_value(SECRET)
        page.click("#reset-config")
        expect(page.locator("#base-url")).to_have_value("")
        expect(page.locator("#api-key")).to_have_value("")
        cleared = "Reset cleared the endpoint and API key"
        expect(page.locator("#connection-note")).to_contain_text(cleared)
        storage = page.evaluate("JSON.stringify([{...sessionStorage}, {...localStorage}])")
        page.context.close()
    assert [request.headers["authorization"] for request in provider.requests] == [
        f"Bearer {SECRET}"
    ] * 2
    assert SECRET not in storage and json.loads(storage)[1] == {}


UNNAMED_CONTROLS = """() => [...document.querySelectorAll('input, textarea, select')]
  .filter((el) => !el.labels?.length && !el.getAttribute('aria-label')
    && !el.getAttribute('aria-labelledby'))
  .map((el) => el.id || el.outerHTML.slice(0, 80))"""
PAST_THE_RIGHT_EDGE = """() => [...document.querySelectorAll('body *')]
  .filter((el) => { const box = el.getBoundingClientRect();
    return box.width > 0 && box.right > document.documentElement.clientWidth + 1; })
  .map((el) => `${el.tagName}.${el.className}`)"""


def test_controls_are_named_tabs_keyboard_usable_and_rtl_text_reads_right_at_1280_px(
    browser: Browser, lab: ServedLab
) -> None:
    with connect(f"{lab.ws_url}/ws/sessions/both-modes", proxy=None) as ws:
        ws.send(json.dumps(start_message(lab_of(lab), "Set the volume to 20", mode="dual_agent")))
        frames_until(ws, of_type("turn_completed"))
        ws.send(json.dumps({"type": "close"}))
        frames_until(ws, of_type("detached"))
        again = start_message(lab_of(lab), "Set the volume to 30", mode="chat_agent_tools")
        ws.send(json.dumps(again))
        frames_until(ws, of_type("turn_completed"))
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    page.on("pageerror", lambda error: pytest.fail(f"page error: {error}"))
    page.goto(lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    assert page.evaluate(UNNAMED_CONTROLS) == []

    send(page, "שלום, מה שלומך?")
    wait_turn_done(page, 1)
    for text in (page.locator(".msg.user .msg-text"), page.locator(".msg.assistant .msg-text")):
        expect(text.first).to_have_attribute("dir", "auto")
    assert (
        page.locator(".msg.user .msg-text").evaluate("el => getComputedStyle(el).direction")
        == "rtl"
    )

    lab_tab = page.locator(".tab[data-view=lab]")
    lab_tab.focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator(".tab[data-view=timeline]")).to_be_focused()
    expect(page.locator(".tab[data-view=timeline]")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#view-timeline")).to_be_visible()
    assert page.evaluate(PAST_THE_RIGHT_EDGE) == []
    page.keyboard.press("ArrowRight")
    expect(page.locator("#view-sessions")).to_be_visible()
    expect(page.locator("#sessions-body tr[data-session='both-modes'] .badge")).to_contain_text(
        "mixed"
    )
    assert page.evaluate(PAST_THE_RIGHT_EDGE) == []
    page.keyboard.press("End")
    expect(page.locator("#view-compare")).to_be_visible()
    assert page.evaluate(PAST_THE_RIGHT_EDGE) == []
    page.keyboard.press("Home")
    expect(lab_tab).to_be_focused()
    expect(page.locator("#view-lab")).to_be_visible()
    assert page.evaluate(PAST_THE_RIGHT_EDGE) == []
    assert page.locator(".tab[tabindex='0']").count() == 1
    page.context.close()
