"""Live equals reopened, in headless Chromium: what the page shows of a turn while it
runs is what it shows after a reload (rounds, texts, tool ids, statuses, reasons)."""

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
PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)
SHOWN = """() => [...document.querySelectorAll('#messages .turn')].map((turn) => ({
  turn: turn.dataset.turn,
  user: turn.querySelector('.msg.user .msg-text')?.textContent,
  rounds: [...turn.querySelectorAll('.round')].map((round) => ({
    label: round.querySelector('.msg-meta').textContent,
    text: round.querySelector('.msg.assistant').hidden ? '' :
      round.querySelector('.msg.assistant .msg-text').textContent,
    calls: [...round.querySelectorAll('.call')].map((call) =>
      [call.dataset.id, call.dataset.status, call.querySelector('.call-name').textContent,
       call.querySelector('.call-args').textContent, call.dataset.resolvedBy || '',
       call.dataset.reason || '']),
  })),
  errors: [...turn.querySelectorAll('.msg.error')].map((el) => el.textContent),
}))"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("views-lab")
    settings = lab_settings(home, simulated_ttft_ms=40, simulated_tokens_per_second=30)
    with served(settings) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


def shown(page: Page) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = page.evaluate(SHOWN)
    return value


def settled(page: Page, quiet_ms: int = 300, timeout_ms: int = 10_000) -> list[dict[str, Any]]:
    """What the page shows once it stopped changing: a reload renders the history first
    and then the records it fetches, a finished turn refreshes its records the same way."""
    before = shown(page)
    for _ in range(timeout_ms // quiet_ms):
        page.wait_for_timeout(quiet_ms)
        now = shown(page)
        if now == before:
            return now
        before = now
    return before


def reopened(page: Page) -> list[dict[str, Any]]:
    page.reload()
    expect(page.locator("#status")).to_have_text("live", timeout=20_000)
    expect(page.locator(".msg.user")).not_to_have_count(0, timeout=10_000)
    return settled(page)


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_a_completed_turn_reads_back_as_it_was_shown_live(page: Page, mode: str) -> None:
    page.click("#new-session")
    page.check(f"input[name=mode][value={mode}]", force=True)
    send(page, PROMPT)
    wait_turn_done(page, 2)  # two rounds: the tools, then the answer
    live = shown(page)

    after = reopened(page)

    assert after == live
    [turn] = live
    labels = [entry["label"] for entry in turn["rounds"]]
    assert labels == [f"Assistant · round {n}" for n in range(1, len(labels) + 1)]
    if mode == "dual_agent":  # the template confirmation stays in its round, no phantom
        assert "Scheduled Lunch with Sam" in turn["rounds"][0]["text"]
    assert all(call[1] == "done" for entry in turn["rounds"] for call in entry["calls"])
    assert all(call[3] for entry in turn["rounds"] for call in entry["calls"])  # arguments


def test_a_cancelled_turn_leaves_no_tool_running_live_or_after_reload(page: Page) -> None:
    page.click("#new-session")
    page.check("input[name=mode][value=dual_agent]", force=True)
    send(page, PROMPT)
    expect(page.locator(".call").first).to_be_visible(timeout=30_000)
    page.click("#cancel-turn")
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)
    expect(page.locator(".msg.error")).to_have_count(1)
    live = shown(page)

    after = reopened(page)

    for view in (live, after):
        statuses = [call[1] for entry in view[0]["rounds"] for call in entry["calls"]]
        assert "running" not in statuses
    assert [c[0] for r in after[0]["rounds"] for c in r["calls"]] == [
        c[0] for r in live[0]["rounds"] for c in r["calls"]
    ]
    assert "cancelled" in after[0]["errors"][0]


def test_the_detail_pane_forgets_the_previous_session(page: Page) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    page.click(".tab[data-view=timeline]")
    page.locator(".wf-bar").first.click()
    expect(page.locator("#detail .detail-empty")).to_have_count(0)

    page.click(".tab[data-view=lab]")
    page.click("#new-session")
    send(page, "Search for BM25")
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)
    page.click(".tab[data-view=timeline]")

    expect(page.locator("#detail .detail-empty")).to_have_count(1)


def test_explain_shows_three_columns_with_differences_and_reopened_dual_arguments(
    page: Page,
) -> None:
    page.click("#new-session")
    page.check("input[name=mode][value=dual_agent]", force=True)
    send(page, PROMPT)
    wait_turn_done(page, 2)

    page.click("#explain-turns")

    dialog = page.locator("#explain-dialog")
    expect(dialog).to_be_visible()
    for title in ("What the model saw", "What is stored", "What the user was shown"):
        expect(dialog.locator(".explain-col h3", has_text=title)).to_have_count(1)
    expect(dialog.locator(".explain-request").first).to_contain_text("chat_agent_request")
    expect(dialog.locator(".diff[data-kind=sent_not_stored]")).to_contain_text("EventAgent results")
    page.click("#explain-close")

    reopened(page)
    calendar = page.locator(".call", has_text="calendar.schedule.create")
    expect(calendar).to_have_attribute("data-resolved-by", "argument_generation")
    expect(calendar.locator(".call-body")).to_contain_text("an argument generation call")
    page.click(".tab[data-view=timeline]")
    expect(page.locator(".turn-summary .chip", has_text="cost")).to_contain_text("unknown")


WATCH_ARGUMENTS = """() => {
  window.__seen = {};
  const note = (key, extra) => {
    if (window.__seen[key]) return;
    window.__seen[key] = { status: document.querySelector('#status').textContent, ...extra };
  };
  new MutationObserver(() => {
    const call = [...document.querySelectorAll('#messages .call')].find(
      (el) => el.querySelector('.call-name').textContent === 'calendar.schedule.create');
    if (call && call.dataset.resolvedBy) {
      note('conversation', { args: call.querySelector('.call-args').textContent,
                             resolvedBy: call.dataset.resolvedBy });
    }
    const bar = document.querySelector('#timeline .wf-bar.wf-fallback');
    if (bar) note('timeline', { label: bar.getAttribute('aria-label') });
  }).observe(document.body, { subtree: true, childList: true, characterData: true,
                              attributes: true });
}"""
SUBMIT = """(text) => {
  document.querySelector('#composer-input').value = text;
  document.querySelector('#composer').requestSubmit();
}"""


def test_dual_arguments_show_live_in_the_conversation_timeline_and_detail(page: Page) -> None:
    page.click("#new-session")
    page.check("input[name=mode][value=dual_agent]", force=True)
    page.click(".tab[data-view=timeline]")  # the waterfall redraws as the turn runs
    page.evaluate(WATCH_ARGUMENTS)
    page.evaluate(SUBMIT, PROMPT)
    expect(page.locator("#messages .stats")).to_have_count(2, timeout=30_000)
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)

    seen: dict[str, Any] = page.evaluate("() => window.__seen")
    # Shown while the turn still ran: from the live stream, not from a reload.
    assert seen["conversation"]["status"] == "running"
    assert '"start_at"' in seen["conversation"]["args"]
    assert seen["conversation"]["resolvedBy"] == "argument_generation"
    assert seen["timeline"]["status"] == "running"
    assert "calendar.schedule.create" in seen["timeline"]["label"]
    page.locator(".wf-row-tool", has_text="calendar.schedule.create").locator(".wf-bar").click()
    detail = page.locator("#detail")
    expect(detail).to_contain_text('"start_at"')
    expect(detail).to_contain_text("an argument generation call")
    page.locator(".wf-bar.wf-fallback").click()
    expect(detail).to_contain_text('"start_at"')
    page.click(".tab[data-view=lab]")
    calendar = page.locator(".call", has_text="calendar.schedule.create")
    live_args = calendar.locator(".call-args").text_content()
    assert live_args and '"start_at"' in live_args

    reopened(page)

    calendar = page.locator(".call", has_text="calendar.schedule.create")
    expect(calendar.locator(".call-args")).to_have_text(live_args)
    expect(calendar).to_have_attribute("data-resolved-by", "argument_generation")


@contextlib.contextmanager
def scripted_lab(home: Path, answer: ScriptedResponse) -> Iterator[ServedLab]:
    """A lab whose model endpoint gives ``answer`` to the first request."""
    with SSETranscriptServer() as model:
        model.add(answer)
        settings = LabSettings(home=home, base_url=model.base_url, model="scripted", max_retries=0)
        with served(settings) as srv:
            yield srv


def failed_live(browser: Browser, lab: ServedLab, message: str) -> tuple[Page, list[Any]]:
    """A new page that sends ``message``, and what it shows once its turn failed."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    send(page, message)
    expect(page.locator(".msg.error")).to_have_count(1, timeout=30_000)
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)
    return page, settled(page)


def test_a_failed_turn_gives_the_same_reason_live_and_after_reload(
    browser: Browser, tmp_path: Path
) -> None:
    overloaded = ScriptedResponse.error(503, {"error": {"message": "overloaded"}})
    with scripted_lab(tmp_path / "home", overloaded) as lab:
        page, live = failed_live(browser, lab, "Hello?")

        after = reopened(page)

        assert after == live
        [error] = live[0]["errors"]
        assert error.startswith("turn failed: provider_error:http_503 — ")
        assert "overloaded" in error
        expect(page.locator(".msg.error")).to_have_attribute(
            "data-reason", "provider_error:http_503"
        )
        page.context.close()


def test_an_answer_cut_off_mid_stream_reads_the_same_live_and_after_reload(
    browser: Browser, tmp_path: Path
) -> None:
    half = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        for text in ("The old bridge ", "was built ")
    ]
    broken = ScriptedResponse.sse(*half, done=False, abort=True)  # the connection is lost
    with scripted_lab(tmp_path / "home", broken) as lab:
        page, live = failed_live(browser, lab, "Tell me about the bridge")

        after = reopened(page)

        assert after == live
        [turn] = live
        assert [entry["text"] for entry in turn["rounds"]] == ["The old bridge was built "]
        assert turn["errors"][0].startswith("turn failed: provider_error")
        page.context.close()
