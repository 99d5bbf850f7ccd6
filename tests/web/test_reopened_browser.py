"""Live equals reopened, in headless Chromium, for what a session says about itself and
about a round beyond its calls: an ended session's status and note, a template
confirmation set apart from the chat text, an event name that was not on offer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.test_browser import VIEWPORT, browser, lab_page, send, wait_turn_done
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]
ENDED_NOTE = "Session ended. Send a message to continue it."
READ = """() => ({
  status: document.querySelector('#status').textContent,
  shown: [...document.querySelectorAll('#messages > .turn, #messages > .notice')].map((el) =>
    el.classList.contains('turn')
      ? `turn ${el.dataset.turn}: ${el.querySelectorAll('.round').length} round(s)`
      : `notice: ${el.textContent}`),
})"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    with served(lab_settings(tmp_path_factory.mktemp("reopened-lab"))) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


def read(page: Page) -> dict[str, Any]:
    value: dict[str, Any] = page.evaluate(READ)
    return value


def settled_read(page: Page, quiet_ms: int = 300, tries: int = 40) -> dict[str, Any]:
    """The status and conversation once they stopped changing (a reload shows
    "connecting…", then the history, then the records it fetches)."""
    before = read(page)
    for _ in range(tries):
        page.wait_for_timeout(quiet_ms)
        now = read(page)
        if now == before and now["status"] != "connecting…":
            return now
        before = now
    return before


def reload_and_read(page: Page, turns: int) -> dict[str, Any]:
    page.reload()
    expect(page.locator("#messages .msg.user")).to_have_count(turns, timeout=20_000)
    return settled_read(page)


def end_session(page: Page, how: str) -> None:
    if how == "terminate":
        send(page, "Goodbye, end the session")
    else:
        page.click("#end-session")
    expect(page.locator("#status")).to_have_text("ended", timeout=20_000)
    expect(page.locator("#messages .notice", has_text=ENDED_NOTE)).to_have_count(1)


@pytest.mark.parametrize("how", ["terminate", "end-session"])
def test_an_ended_session_reads_ended_after_a_reload_as_it_did_live(page: Page, how: str) -> None:
    page.click("#new-session")
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    end_session(page, how)
    live = settled_read(page)

    after = reload_and_read(page, 2 if how == "terminate" else 1)

    assert after == live
    assert live["status"] == "ended"
    assert live["shown"][-1] == f"notice: {ENDED_NOTE}"


def test_a_session_continued_after_it_ended_keeps_the_note_where_it_ended(page: Page) -> None:
    page.click("#new-session")
    send(page, "Goodbye, end the session")
    expect(page.locator("#status")).to_have_text("ended", timeout=20_000)
    reload_and_read(page, 1)
    send(page, "Set the volume to 30")  # continued from the reopened page
    expect(page.locator("#messages .msg.user")).to_have_count(2, timeout=20_000)
    expect(page.locator("#status")).to_have_text("live", timeout=20_000)
    send(page, "Set the volume to 40")  # a turn queued on the running session
    expect(page.locator("#messages .msg.user")).to_have_count(3, timeout=20_000)
    expect(page.locator("#status")).to_have_text("live", timeout=20_000)
    live = settled_read(page)

    after = reload_and_read(page, 3)

    assert after == live
    assert [entry.split(":")[0] for entry in live["shown"]] == [
        "turn 1",
        "notice",
        "turn 2",
        "turn 3",
    ]
    assert live["status"] == "live"


SAID = """() => [...document.querySelectorAll('#messages .round')].map((round) => {
  const said = round.querySelector('.msg.assistant .msg-text');
  return {
    chat: said.firstChild && said.firstChild.nodeType === Node.TEXT_NODE
      ? said.firstChild.textContent : '',
    spoken: [...said.querySelectorAll('.msg-spoken')].map((el) => el.textContent),
    lines: said.innerText,
  };
})"""


WATCH_GLUED = """() => {
  window.__glued = false;
  new MutationObserver(() => {
    for (const said of document.querySelectorAll('#messages .msg.assistant .msg-text')) {
      if (said.innerText.includes('.Scheduled')) window.__glued = true;
    }
  }).observe(document.querySelector('#messages'),
             { subtree: true, childList: true, characterData: true });
}"""


def said(page: Page) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = page.evaluate(SAID)
    return value


def test_a_template_confirmation_is_set_apart_from_the_chat_text_live_and_reopened(
    page: Page,
) -> None:
    page.click("#new-session")
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    page.evaluate(WATCH_GLUED)
    send(page, "Schedule a design review with Dana tomorrow at 10 and look up SQLite WAL")
    wait_turn_done(page, 2)
    live = said(page)
    assert page.evaluate("() => window.__glued") is False  # not even while it streamed

    reload_and_read(page, 1)
    after = said(page)

    assert after == live
    first = live[0]
    assert first["chat"].endswith("SQLite WAL.") and "Scheduled" not in first["chat"]
    [confirmation] = first["spoken"]
    assert confirmation.startswith("Scheduled Design review with Dana for ")
    assert "WAL.\nScheduled Design review" in first["lines"]  # a line of its own
    assert "WAL.Scheduled" not in first["lines"]


def chat_text(text: str) -> ScriptedResponse:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    stop = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return ScriptedResponse.sse(chunk, stop)


IGNORED = """() => [...document.querySelectorAll('#messages .round')].map((round) =>
  [...round.querySelectorAll('.ignored-event')].map((el) => el.textContent))"""


@contextlib.contextmanager
def scripted(home: Path, *answers: ScriptedResponse) -> Iterator[ServedLab]:
    """A lab whose model endpoint gives ``answers``, one per request, in order."""
    with SSETranscriptServer(*answers) as model:
        settings = LabSettings(home=home, base_url=model.base_url, model="scripted", max_retries=0)
        with served(settings) as srv:
            yield srv


def test_an_event_name_not_on_offer_is_shown_in_its_round_live_and_reopened(
    browser: Browser, tmp_path: Path
) -> None:
    answer = chat_text("Trying <event>nuke.all</event> now.")
    with scripted(tmp_path / "home", answer) as lab:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.goto(lab.base_url + "/")
        expect(page.locator("#tool-list input")).not_to_have_count(0)
        page.check("input[name=mode][value=dual_agent]", force=True)
        send(page, "Wipe everything")
        wait_turn_done(page, 1)
        live = page.evaluate(IGNORED)

        reload_and_read(page, 1)
        after = page.evaluate(IGNORED)

        assert after == live == [["ignored event: nuke.all (not an available tool)"]]
        page.click(".tab[data-view=timeline]")
        page.locator(".wf-bar.wf-chat").first.click()
        detail = page.locator("#detail .detail-section").first
        expect(detail.locator("summary")).to_have_text("ignored_events")
        expect(detail).to_contain_text("ignored event: nuke.all (not an available tool)")
        page.context.close()
