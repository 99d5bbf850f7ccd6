"""The page tells the truth, in headless Chromium: start errors next to their field,
a phone layout, session status and search, per-turn compare, a readable timeline,
queued messages and live figures, and one clear question for a missing token.

Phone screenshots go to ``docs/screenshots/`` when ``AGENT_LAB_SCREENSHOTS=1``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from playwright.sync_api import Browser, Dialog, FloatRect, Page, ViewportSize, expect

from tests.web.test_browser import CHROMIUM_ARGS, VIEWPORT, browser, send, shots, wait_turn_done
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser
PHONE: ViewportSize = {"width": 390, "height": 844}
TOKEN = "honest-ui-token-0123456789"
__all__ = ["CHROMIUM_ARGS", "browser", "shots"]  # fixtures shared with test_browser


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("honest-lab")
    settings = lab_settings(home, simulated_ttft_ms=60, simulated_tokens_per_second=400)
    with served(settings.model_copy(update={"max_retries": 0})) as srv:
        yield srv


def open_page(browser: Browser, url: str, viewport: ViewportSize = VIEWPORT) -> Page:
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.on("pageerror", lambda error: pytest.fail(f"page error: {error}"))
    page.goto(url)
    return page


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    page = open_page(browser, lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    yield page
    page.context.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ 7. start errors


def test_a_start_error_shows_next_to_its_field_and_keeps_the_message(page: Page) -> None:
    page.fill("#chat-temperature", "7")
    send(page, "Set the volume to 25")
    error = page.locator("#chat-temperature-error")
    expect(error).to_contain_text("temperature")
    expect(page.locator("#chat-temperature")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#composer-input")).to_have_value("Set the volume to 25")
    expect(page.locator("#status")).to_have_text("not started")

    page.fill("#chat-temperature", "0.5")
    expect(error).to_have_count(0)
    page.fill("#base-url", "ftp://models.example/v1")
    page.press("#composer-input", "Enter")
    expect(page.locator("#base-url-error")).to_contain_text("http(s)")
    expect(page.locator("#composer-input")).to_have_value("Set the volume to 25")

    page.fill("#base-url", "")
    page.press("#composer-input", "Enter")
    wait_turn_done(page, 1)  # the same page, the same session: usable
    expect(page.locator(".msg.user")).to_contain_text("Set the volume to 25")
    expect(page.locator(".view-lab .field-error")).to_have_count(0)


# ------------------------------------------------------------------ 8. phone


def no_horizontal_overflow(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"page is {width} px wide"


def inside_viewport(page: Page, selector: str) -> FloatRect:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 0.5, (selector, box)
    return box


def overlapping(boxes: list[FloatRect], axis: Literal["x", "y"]) -> list[int]:
    size: Literal["width", "height"] = "width" if axis == "x" else "height"
    ends = [box[axis] + box[size] for box in boxes]
    return [i for i in range(1, len(boxes)) if boxes[i][axis] < ends[i - 1]]


def boxes_of(page: Page, selector: str) -> list[FloatRect]:
    boxes = (element.bounding_box() for element in page.locator(selector).all())
    return [box for box in boxes if box is not None]


def test_the_lab_works_on_a_phone(browser: Browser, lab: ServedLab, shots: Path) -> None:
    page = open_page(browser, lab.base_url + "/", PHONE)
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    no_horizontal_overflow(page)
    for view in ("lab", "timeline", "sessions", "compare"):
        inside_viewport(page, f".tab[data-view={view}]")
    composer = inside_viewport(page, "#composer-input")
    assert composer["width"] >= 300 and composer["y"] + composer["height"] <= PHONE["height"]
    for action in ("#new-session", "#end-session", "#explain-turns", "#send", "#cancel-turn"):
        inside_viewport(page, action)
    send(page, "Search for sqlite wal and set the volume to 20")
    wait_turn_done(page, 2)
    no_horizontal_overflow(page)
    page.screenshot(path=str(shots / "lab-phone.png"))

    page.click(".tab[data-view=timeline]")
    expect(page.locator(".wf-bar.wf-tool")).to_have_count(2)
    no_horizontal_overflow(page)
    ticks = boxes_of(page, ".wf-tick")
    assert len(ticks) >= 2 and overlapping(ticks, "x") == []
    labels = boxes_of(page, ".wf-rows .wf-label")
    assert overlapping(labels, "y") == []
    durations = boxes_of(page, ".wf-dur")  # one line each, so none runs into the next row
    assert durations and all(box["height"] <= 18 for box in durations)
    assert overlapping(boxes_of(page, ".wf-marker-label"), "x") == []
    page.screenshot(path=str(shots / "timeline-phone.png"))

    page.click(".tab[data-view=sessions]")
    expect(page.locator("#sessions-body tr")).not_to_have_count(0)
    no_horizontal_overflow(page)
    for action in ("Open", "JSON", "JSONL", "Delete"):
        inside_viewport(page, f"#sessions-body tr button >> text='{action}'")
    page.screenshot(path=str(shots / "sessions-phone.png"))

    page.click(".tab[data-view=compare]")
    expect(page.locator(".compare-col").first).to_contain_text("dual_agent")
    no_horizontal_overflow(page)
    page.context.close()


# ------------------------------------------------------------------ 9. sessions list


def test_sessions_show_status_search_filter_and_one_open(page: Page) -> None:
    page.click("#new-session")
    long_title = "Search for " + "a very long and winding question about write-ahead logs " * 3
    send(page, long_title)
    wait_turn_done(page, 2)
    page.click("#new-session")
    page.fill("#base-url", f"http://127.0.0.1:{closed_port()}/v1")
    send(page, "Set the volume to 5 please")
    expect(page.locator(".msg.error")).to_have_count(1, timeout=20_000)
    page.fill("#base-url", "")

    page.click(".tab[data-view=sessions]")
    failed = page.locator("#sessions-body tr", has_text="Set the volume to 5 please")
    expect(failed.locator(".status")).to_have_text("failed")
    long_row = page.locator("#sessions-body tr", has_text="write-ahead")
    expect(long_row.locator(".status")).to_have_text("completed")
    title = long_row.locator(".session-title")
    assert title.evaluate("el => getComputedStyle(el).textOverflow") == "ellipsis"
    assert title.evaluate("el => el.scrollWidth > el.clientWidth")  # cut, with an ellipsis
    for row in page.locator("#sessions-body tr").all():
        expect(row.locator("button", has_text="Open")).to_have_count(1)
        expect(row.locator("button", has_text="Continue")).to_have_count(0)

    page.fill("#sessions-search", "volume to 5")
    expect(page.locator("#sessions-body tr")).to_have_count(1)
    page.fill("#sessions-search", "")
    page.select_option("#sessions-filter", "failed")
    expect(page.locator("#sessions-body tr .status")).to_have_text(["failed"])
    page.fill("#sessions-search", "nothing matches this")
    expect(page.locator("#sessions-none")).to_be_visible()
    page.fill("#sessions-search", "")
    page.select_option("#sessions-filter", "")

    long_row.locator("button", has_text="Open").click()
    expect(page.locator(".msg.user").first).to_contain_text("winding question")
    send(page, "Set the volume to 30")  # Open also continues the session
    wait_turn_done(page, 3)
    expect(page.locator(".msg.user")).to_have_count(2)


# ------------------------------------------------------------------ 10. compare


def test_compare_goes_turn_by_turn_and_shows_cost_unknown(page: Page) -> None:
    page.click("#new-session")
    page.check("input[name=mode][value=dual_agent]", force=True)
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    send(page, "Set the volume to 40")
    wait_turn_done(page, 2)
    page.click("#new-session")
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)

    page.click(".tab[data-view=compare]")
    sessions = page.locator("#compare-a option")
    expect(sessions).not_to_have_count(0)
    dual = page.locator("#compare-a option", has_text="dual_agent").first
    first_dual = dual.get_attribute("value")
    page.select_option("#compare-a", first_dual)
    column = page.locator("#compare-col-b")
    expect(column.locator(".count-note")).to_contain_text("A has 2 turns, B has 1")
    expect(column.locator(".deltas")).to_contain_text("turn 1 vs A")
    expect(column.locator(".deltas")).to_contain_text("TTFT")
    expect(column.locator(".metric", has_text="cost")).to_contain_text("unknown")
    expect(column.locator(".turn-table td").last).to_have_text("unknown")
    # B ran on the server's shared client after earlier sessions warmed it: not cold.
    expect(column.locator(".turn-table .cold")).to_have_count(0)
    page.select_option("#compare-turn", "2")
    expect(column.locator(".deltas")).to_contain_text("only in A")


FLAGGED = """async () => {
  const { renderCompare } = await import("/static/compare.js");
  const columns = [document.createElement("div"), document.createElement("div")];
  const record = {
    session: { id: "s1", mode: "dual_agent", config: {} },
    usage: { turn_count: 1, cost: 0.5 },
    turns: [{ turn_index: 1, cost: 0.25, turn_wall_time_ms: 900 }],
    calls: [{ call_kind: "chat", round_index: 1, turn_index: 1, ttft_ms: 800, cold_start: true }],
    audit: [],
  };
  renderCompare(columns, [record, record], 1, () => {});
  return columns[0].textContent;
}"""


def test_compare_flags_cold_starts_and_shows_cost_when_recorded(page: Page) -> None:
    text = page.evaluate(FLAGGED)
    assert "cold" in text
    assert "$0.25" in text and "$0.50" in text  # as format_usd() writes them


# ------------------------------------------------------------------ 11. timeline


def test_the_timeline_is_readable_and_shows_the_call(page: Page) -> None:
    send(page, "Search for sqlite wal and set the volume to 20")
    wait_turn_done(page, 2)
    page.click(".tab[data-view=timeline]")
    bars = page.locator(".wf-bar.wf-tool")
    expect(bars).to_have_count(2)
    for bar in bars.all():
        box = bar.bounding_box()
        assert box is not None and box["width"] >= 9.5
        assert bar.get_attribute("aria-label")
    label = page.locator(".wf-rows .wf-label", has_text="device.volume.adjust")
    cut = "el => el.scrollWidth > el.clientWidth + 1"
    page.set_viewport_size(PHONE)  # narrow enough that the label is cut at rest
    assert label.evaluate(cut)
    label.hover()
    assert not label.evaluate(cut)  # the full label on hover
    page.mouse.move(0, 0)
    assert label.evaluate(cut)
    label.focus()
    assert not label.evaluate(cut)  # and on keyboard focus
    assert label.get_attribute("tabindex") == "0"
    assert label.get_attribute("title") == "device.volume.adjust"
    page.set_viewport_size(VIEWPORT)
    legend = page.locator(".wf-markers-legend")
    expect(legend).to_contain_text("turn started")
    expect(legend).to_contain_text("turn completed")
    expect(page.locator(".wf-marker-label").first).to_have_text("1")
    summary = page.locator(".turn-summary")
    expect(summary).to_contain_text("TTFT")
    expect(summary.locator(".chip", has_text="cost")).to_contain_text("unknown")
    page.locator(".wf-row-tool", has_text="device.volume.adjust").locator(".wf-bar").click()
    detail = page.locator("#detail")
    expect(detail.locator("summary").get_by_text("arguments", exact=True)).to_have_count(1)
    result = detail.locator(".detail-section", has=page.get_by_text("result", exact=True))
    expect(result).to_contain_text('"volume": 20')


# ------------------------------------------------------------------ 12. hidden state


@pytest.fixture(scope="module")
def slow_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("slow-lab")
    with served(lab_settings(home, simulated_ttft_ms=900, simulated_tokens_per_second=30)) as srv:
        yield srv


def test_queued_messages_budget_and_live_figures_are_shown(
    browser: Browser, slow_lab: ServedLab
) -> None:
    page = open_page(browser, slow_lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    page.fill("#max-event-loops", "1")
    send(page, "Search for sqlite wal and set the volume to 20")
    expect(page.locator("#status")).to_have_text("running")
    usage = page.locator("#conv-usage")
    expect(usage).to_contain_text("turn 1 running")
    assert "0 tokens" not in usage.inner_text() and "wall 0 ms" not in usage.inner_text()
    send(page, "Then set it to 30")
    send(page, "And to 40")
    queued = page.locator(".msg.user.queued")
    expect(queued).to_have_count(2)
    expect(page.locator("#drop-queued")).to_have_text("Drop queued (2)")
    page.click("#drop-queued")
    expect(queued).to_have_count(0)
    expect(page.locator("#drop-queued")).to_be_hidden()
    budget = page.locator(".notice", has_text="Event budget used up")
    expect(budget).to_have_count(1, timeout=20_000)
    # Round 2 waits ~900 ms for its first token: the header shows round 1's live figures.
    expect(usage).to_contain_text("tokens so far")
    expect(usage).to_contain_text("TTFT")
    assert "wall 0 ms" not in usage.inner_text()
    wait_turn_done(page, 2)
    expect(page.locator(".msg.user")).to_have_count(1)  # the dropped ones never ran
    expect(usage).to_contain_text("1 turn")
    page.context.close()


# ------------------------------------------------------------------ 13. missing token


@pytest.fixture(scope="module")
def locked_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    home = tmp_path_factory.mktemp("locked-lab")
    with served(lab_settings(home), token=TOKEN) as srv:
        yield srv


def count_dialogs(page: Page) -> Any:
    page.add_init_script(
        "window.__asked = 0; const show = HTMLDialogElement.prototype.showModal;"
        "HTMLDialogElement.prototype.showModal = function () { window.__asked += 1;"
        " return show.call(this); };"
    )


def test_a_missing_token_is_asked_for_once(browser: Browser, locked_lab: ServedLab) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    prompts: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        prompts.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    count_dialogs(page)
    page.goto(locked_lab.base_url + "/")
    dialog = page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Access token needed")
    dialog.locator("button", has_text="Cancel").click()
    endpoint = page.locator("#endpoint")
    expect(endpoint).to_have_text("access token needed")
    expect(endpoint).to_have_attribute("data-state", "locked")
    assert page.evaluate("window.__asked") == 1  # one question for the three requests
    page.click("#enter-token")
    page.fill("#token-input", TOKEN)
    page.click("#token-ok")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    expect(endpoint).to_have_attribute("data-state", "ok")
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    assert page.evaluate("window.__asked") == 2 and prompts == []  # no window.prompt at all
    assert "unreachable" not in endpoint.inner_text()
    assert sockets and all("token" not in url for url in sockets)  # it rides in a header
    context.close()


# ------------------------------------------------------------------ 6. deleted elsewhere


def test_a_tab_is_told_when_another_deletes_its_session(page: Page, browser: Browser) -> None:
    page.click("#new-session")
    send(page, "Set the volume to 15")
    wait_turn_done(page, 1)
    page.click("#end-session")
    expect(page.locator("#status")).to_have_text("ended")
    session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")

    other = open_page(browser, page.url)
    other.on("dialog", lambda dialog: dialog.accept())
    other.click(".tab[data-view=sessions]")
    row = f"#sessions-body tr[data-session='{session_id}']"
    other.locator(f"{row} button", has_text="Delete").click()
    expect(other.locator(row)).to_have_count(0)
    other.context.close()

    expect(page.locator(".notice", has_text="deleted in another tab")).to_have_count(1)
    expect(page.locator("#status")).to_have_text("deleted")
    send(page, "Are you still there?")
    expect(page.locator("#toast")).to_contain_text("deleted")
    page.click(".tab[data-view=sessions]")
    expect(page.locator("#refresh-sessions")).to_be_visible()
    expect(page.locator(row)).to_have_count(0)  # not re-created as turn 1
