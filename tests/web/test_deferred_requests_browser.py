"""A reopened session's requests read in the detail panes as they did live, though
the session's trail comes without them: the page fetches a turn's requests when a bar
of it is opened (the timeline's detail and Compare's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.web.test_browser import browser, lab_page, send
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]
BARS = ".wf-bar.wf-chat, .wf-bar.wf-agent"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    with served(lab_settings(tmp_path_factory.mktemp("deferred-lab"))) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


def wait_turns(page: Page, count: int) -> None:
    page.wait_for_function(
        f"""() => document.querySelectorAll('#messages .msg.user').length >= {count}
        && document.querySelector('#status').dataset.state === 'live'""",
        timeout=30_000,
    )


def sections(pane: Locator) -> dict[str, str]:
    """The detail pane's sections, once every request it fetches has come."""
    expect(pane.locator("pre[aria-busy]")).to_have_count(0)
    names = pane.locator(".detail-section summary").all_inner_texts()
    texts = [pre.text_content() or "" for pre in pane.locator(".detail-section pre").all()]
    return dict(zip(names, texts, strict=True))


def timeline_details(page: Page, turn: str) -> list[dict[str, str]]:
    page.click(".tab[data-view=timeline]")
    page.select_option("#timeline-turn", turn)
    bars = page.locator(f"#timeline {BARS}")
    expect(bars).not_to_have_count(0)
    shown = []
    for index in range(bars.count()):
        bars.nth(index).click()
        shown.append(sections(page.locator("#detail")))
    return shown


def test_reopened_requests_read_as_they_did_live(page: Page) -> None:
    page.check("input[name=mode][value=dual_agent]", force=True)
    send(page, "Set the volume to 20")
    wait_turns(page, 1)
    send(page, "Search for SQLite WAL and set the volume to 30")
    wait_turns(page, 2)
    live = timeline_details(page, "2")
    session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")

    page.reload()
    wait_turns(page, 2)
    reopened = timeline_details(page, "2")

    assert reopened == live
    requests = [shown["chat_agent_request"] for shown in live if "chat_agent_request" in shown]
    assert requests and all('"messages"' in text for text in requests)
    assert "Set the volume to 20" in requests[0]  # the earlier turn, as sent again
    agent = [shown["event_agent_request"] for shown in live if "event_agent_request" in shown]
    assert agent and all('"history"' in text for text in agent)

    page.click(".tab[data-view=compare]")
    page.select_option("#compare-a", session_id)
    page.select_option("#compare-turn", "2")
    page.locator("#compare-col-a .wf-bar.wf-chat").first.click()
    compared = sections(page.locator("#compare-detail"))
    assert compared["chat_agent_request"] == requests[0]


COUNT_LAYOUTS = """(() => {
  const read = Object.getOwnPropertyDescriptor(Element.prototype, 'scrollHeight').get;
  window.__scrollReads = 0;
  Object.defineProperty(Element.prototype, 'scrollHeight', { configurable: true, get() {
    if (this.id === 'messages') window.__scrollReads += 1;
    return read.call(this);
  } });
})();"""


def test_a_reopened_session_is_laid_out_once_not_once_per_line(page: Page) -> None:
    """Reading the conversation's height lays it out: a reload that did so after every
    line it added laid out the whole session again and again (a long task)."""
    for count in range(1, 7):
        send(page, f"turn {count}: set the volume to {count}")
        wait_turns(page, count)
    page.context.add_init_script(COUNT_LAYOUTS)
    page.reload()
    wait_turns(page, 6)
    page.wait_for_timeout(300)  # the record refresh after the history
    reads = page.evaluate("window.__scrollReads")
    assert 1 <= reads <= 3, reads
