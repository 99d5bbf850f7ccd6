"""The page in headless Chromium (Playwright): conversation, timeline, reload, sessions,
compare, and model or tool output that must stay inert text.

Screenshots of the four main views go to ``docs/screenshots/`` when
``AGENT_LAB_SCREENSHOTS=1`` (else to a temporary folder).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect, sync_playwright

from agent_lab.application.pricing import Price
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.interfaces.settings import SIMULATED_MODEL
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
XSS_MODEL = "<img src=x onerror=window.__xss=1>"
XSS_TOOL = "<img src=x onerror=window.__xss=2>"
XSS_SCRIPT = "<script>window.__xss=3</script>"
REPO = Path(__file__).resolve().parents[2]


def probe_tool() -> ToolDefinition:
    """A search-like tool whose result is an HTML injection attempt."""

    def handler(event: Any) -> dict[str, Any]:
        return {"html": XSS_TOOL, "script": XSS_SCRIPT, "query": event.arguments.get("query")}

    return ToolDefinition(
        name="probe.web.search",
        description="Search the web (a test probe that returns HTML).",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        handler=handler,
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    from agent_lab.application.builtin_tools import builtin_tool_definitions

    home = tmp_path_factory.mktemp("browser-lab")
    registry = ToolRegistry([*builtin_tool_definitions(local_backends(home)), probe_tool()])
    settings = lab_settings(home, simulated_ttft_ms=60, simulated_tokens_per_second=500)
    # Priced, so the screenshots show what turns cost (an unpriced model says "unknown").
    price = Price(input_per_mtok=Decimal("0.15"), output_per_mtok=Decimal("0.6"))
    settings = settings.model_copy(update={"prices": {SIMULATED_MODEL: price}})
    with served(settings, registry=registry) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


def lab_page(browser: Browser, lab: ServedLab, init_script: str | None = None) -> Iterator[Page]:
    """A fresh page on the lab once its tool list is loaded; a page error fails the test.
    ``init_script`` runs in every document before the page's own scripts."""
    context = browser.new_context(viewport=VIEWPORT)
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    yield page
    context.close()
    assert errors == []


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("AGENT_LAB_SCREENSHOTS") == "1":
        target = REPO / "docs" / "screenshots"
        target.mkdir(parents=True, exist_ok=True)
        return target
    return tmp_path_factory.mktemp("screenshots")


def send(page: Page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def wait_turn_done(page: Page, rounds: int) -> None:
    expect(page.locator(".stats")).to_have_count(rounds, timeout=20_000)
    expect(page.locator("#status")).to_have_text("live", timeout=20_000)


def test_conversation_streams_text_events_tools_and_stats(page: Page, shots: Path) -> None:
    send(page, "Search for sqlite wal and set the volume to 20")
    wait_turn_done(page, 2)
    assistant = page.locator(".msg.assistant").first
    expect(assistant).to_contain_text("Let me look up sqlite wal")
    calls = page.locator(".call")
    expect(calls).to_have_count(2)
    expect(page.locator(".call[data-status=done]")).to_have_count(2)
    volume = page.locator(".call", has_text="device.volume.adjust")
    volume.locator("summary").click()
    expect(volume.locator(".call-pre").nth(1)).to_contain_text('"volume": 20')
    expect(page.locator(".stats").first).to_contain_text("TTFT")
    expect(page.locator(".stats").first).to_contain_text("tokens")
    volume.locator("summary").click()  # fold it again for the screenshot
    send(page, "Schedule a design review tomorrow at 9am Europe/Paris")
    wait_turn_done(page, 3)
    expect(page.locator(".msg.assistant").last).to_contain_text("Scheduled")
    page.screenshot(path=str(shots / "lab.png"))

    page.click(".tab[data-view=timeline]")
    page.select_option("#timeline-turn", "1")
    expect(page.locator(".wf-bar.wf-chat")).to_have_count(2)
    expect(page.locator(".wf-bar.wf-tool")).to_have_count(2)
    expect(page.locator(".wf-bar.wf-agent")).to_have_count(1)
    page.locator(".wf-bar.wf-chat").first.click()
    detail = page.locator("#detail")
    expect(detail).to_contain_text("chat_agent_request")
    expect(detail).to_contain_text('"messages"')
    page.screenshot(path=str(shots / "timeline.png"))


def test_reload_reconnects_to_the_same_session(page: Page) -> None:
    send(page, "Set the volume to 35")
    wait_turn_done(page, 1)
    session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(1, timeout=10_000)
    expect(page.locator(".msg.user")).to_contain_text("Set the volume to 35")
    expect(page.locator("#status")).to_have_text("live")
    expect(page.locator(".stats")).to_have_count(1)
    send(page, "Set the volume to 60")
    wait_turn_done(page, 2)
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator(".call", has_text="device.volume.adjust").last).to_contain_text("done")
    assert page.evaluate("sessionStorage.getItem('agentlab.session')") == session_id


def test_sessions_and_compare(page: Page, shots: Path) -> None:
    for mode in ("dual_agent", "chat_agent_tools"):
        page.click("#new-session")
        page.check(f"input[name=mode][value={mode}]", force=True)
        send(page, "Search for sqlite wal and set the volume to 20")
        wait_turn_done(page, 2)
    page.click(".tab[data-view=sessions]")
    rows = page.locator("#sessions-body tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 2
    expect(page.locator("#sessions-body .badge.mode-chat_agent_tools").first).to_be_visible()
    page.screenshot(path=str(shots / "sessions.png"))

    page.click(".tab[data-view=compare]")
    columns = page.locator(".compare-col")
    expect(columns.nth(0)).to_contain_text("dual_agent")
    expect(columns.nth(1)).to_contain_text("chat_agent_tools")
    expect(columns.nth(0).locator(".wf-bar.wf-tool")).to_have_count(2)
    expect(columns.nth(1).locator(".wf-bar.wf-tool")).to_have_count(2)
    expect(columns.nth(1).locator(".metric", has_text="tools")).to_contain_text("2")
    page.screenshot(path=str(shots / "compare.png"))
    columns.nth(1).locator(".wf-bar.wf-chat").first.click()
    expect(page.locator("#compare-detail")).to_contain_text("chat_agent_request")

    page.click(".tab[data-view=sessions]")
    row = page.locator("#sessions-body tr", has_text="chat_agent_tools").first
    row.locator("button", has_text="Open").click()
    expect(page.locator(".msg.user")).to_contain_text("Search for sqlite wal")
    expect(page.locator("input[name=mode][value=chat_agent_tools]")).to_be_checked()


def test_html_in_model_output_and_tool_results_stays_text(page: Page) -> None:
    page.uncheck("#tool-list input[value='knowledge.web.search']")
    page.check("#tool-list input[value='probe.web.search']")
    send(page, f"Search for {XSS_MODEL}")
    wait_turn_done(page, 2)
    page.locator(".call summary").first.click()
    messages = page.locator("#messages")
    expect(messages).to_contain_text(f"Let me look up {XSS_MODEL}")
    expect(page.locator(".call-pre").nth(1)).to_contain_text(XSS_TOOL)
    expect(page.locator(".call-pre").nth(1)).to_contain_text(XSS_SCRIPT)
    page.click(".tab[data-view=timeline]")
    page.locator(".wf-bar.wf-agent").first.click()
    expect(page.locator("#detail")).to_contain_text("probe.web.search")
    assert page.evaluate("window.__xss") is None
    assert page.locator("#messages img, #messages script, #detail img").count() == 0
