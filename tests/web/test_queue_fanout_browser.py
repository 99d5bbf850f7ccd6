"""Queued messages that will not run, and a tab continuing a stored session another
process added turns to, in headless Chromium:

* a tab whose queued messages another tab drops (its *End session*) stops showing them
  as queued, says they will not run, and gets their text back in the composer;
* a message queued behind a turn that ends the session (goodbye) is said not to run and
  goes back into the composer; *Send* then continues the session with it;
* a tab "ready to continue" shows the turn another process ran meanwhile as soon as its
  message starts the session, as a reload shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_holder import HOLDER_MESSAGE, Holder, holder_answers
from tests.web.test_browser import browser, lab_page, send
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]
QUEUED = ["Then set it to 30", "And to 40"]
SESSION_KEY = "agentlab.session"


@pytest.fixture(scope="module")
def slow_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("fanout-lab")
    with served(lab_settings(home, simulated_ttft_ms=900, simulated_tokens_per_second=30)) as srv:
        yield srv


def open_tab(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


@pytest.fixture
def tab_a(browser: Browser, slow_lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, slow_lab)


@pytest.fixture
def tab_b(browser: Browser, slow_lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, slow_lab)


def session_of(page: Page) -> str:
    session_id: str = page.evaluate(f"sessionStorage.getItem('{SESSION_KEY}')")
    return session_id


def join(page: Page, session_id: str) -> None:
    """The tab shows ``session_id`` (as a reload of a tab that had it open does)."""
    page.evaluate(f"sessionStorage.setItem('{SESSION_KEY}', '{session_id}')")
    page.reload()


def test_messages_another_tab_drops_are_said_not_to_run_and_given_back(
    tab_a: Page, tab_b: Page
) -> None:
    send(tab_a, "Search for sqlite wal and set the volume to 20")
    expect(tab_a.locator("#status")).to_have_text("running")
    join(tab_b, session_of(tab_a))
    expect(tab_b.locator("#status")).to_have_text("running", timeout=20_000)
    for text in QUEUED:
        send(tab_a, text)
    queued = tab_a.locator(".msg.user.queued")
    expect(queued).to_have_count(2)

    tab_b.click("#end-session")  # `close`: the waiting turns are dropped first

    expect(queued).to_have_count(0, timeout=20_000)
    expect(tab_a.locator("#drop-queued")).to_be_hidden()
    notice = tab_a.locator("#messages .notice", has_text="2 queued messages will not run")
    expect(notice).to_contain_text("ended in another tab or window")
    expect(tab_a.locator("#composer-input")).to_have_value("\n".join(QUEUED))
    expect(tab_a.locator("#status")).to_have_text("ended", timeout=20_000)
    expect(tab_a.locator("#messages .msg.user")).to_have_count(1)  # they never ran


def test_a_message_queued_behind_a_goodbye_goes_back_to_the_composer(tab_a: Page) -> None:
    late = "Wait, set the volume to 10 first."
    send(tab_a, "That's all, goodbye!")
    expect(tab_a.locator("#status")).to_have_text("running")
    send(tab_a, late)
    expect(tab_a.locator(".msg.user.queued")).to_have_count(1)

    expect(tab_a.locator("#status")).to_have_text("ended", timeout=30_000)
    expect(tab_a.locator(".msg.user.queued")).to_have_count(0)
    expect(tab_a.locator("#drop-queued")).to_be_hidden()
    expect(tab_a.locator("#messages .notice", has_text="will not run")).to_contain_text(
        "the session ended before their turn"
    )
    expect(tab_a.locator("#composer-input")).to_have_value(late)

    tab_a.click("#send")  # the session continues with it
    turn_2 = tab_a.locator('#messages .turn[data-turn="2"] .msg.user')
    expect(turn_2).to_have_text(f"You · turn 2{late}", timeout=20_000)


@pytest.fixture
def model() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer(*holder_answers()) as server:
        yield server


def test_a_tab_ready_to_continue_shows_the_turn_another_process_added(
    browser: Browser, tmp_path: Path, model: SSETranscriptServer
) -> None:
    settings = lab_settings(tmp_path / "home")
    with served(settings) as lab:
        for page in open_tab(browser, lab):
            join(page, "gap")
            expect(page.locator("#status")).to_have_text("ready to continue", timeout=20_000)
            with Holder(settings.database(), model.base_url, "gap") as holder:
                holder.release()

            send(page, "Set the volume to 60")

            turns = page.locator("#messages .turn")
            expect(page.locator('#messages .turn[data-turn="2"] .stats')).to_have_count(
                1, timeout=20_000
            )
            live = [turns.nth(i).locator(".msg.user").text_content() for i in range(turns.count())]
            page.reload()
            expect(page.locator('#messages .turn[data-turn="2"] .stats')).to_have_count(
                1, timeout=20_000
            )
            reloaded = [
                turns.nth(i).locator(".msg.user").text_content() for i in range(turns.count())
            ]
            assert live == [f"You · turn 1{HOLDER_MESSAGE}", "You · turn 2Set the volume to 60"]
            assert reloaded == live
