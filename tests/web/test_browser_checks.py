"""More of the page's honesty, in headless Chromium against a real server: cold starts
and cost from a real run, a request too large for the server, secrets never shown, and
cancelled sessions named as such in the list."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect
from websockets.sync.client import connect

from agent_lab.application.pricing import Price
from agent_lab.interfaces.settings import SIMULATED_MODEL
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.test_browser import CHROMIUM_ARGS, VIEWPORT, browser, send, wait_turn_done
from tests.web.test_browser_honest import PHONE
from tests.web.test_hardening import chat_reply, frames_until, lab_of, of_type
from tests.web.web_support import ServedLab, lab_settings, served, start_message

__all__ = ["CHROMIUM_ARGS", "browser"]  # fixtures shared with test_browser
SECRET = "sk-page-SECRET-51f0c2aa7e"
PRICE = Price(input_per_mtok=Decimal("2.5"), output_per_mtok=Decimal("10"))


def open_page(browser: Browser, lab: ServedLab) -> Page:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.on("pageerror", lambda error: pytest.fail(f"page error: {error}"))
    page.goto(lab.base_url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    return page


@pytest.fixture
def priced_lab(lab_home: Path) -> Iterator[ServedLab]:
    """A fresh server (no model call made yet) whose simulated model has a price."""
    settings = lab_settings(
        lab_home,
        simulated_ttft_ms=60,
        simulated_tokens_per_second=400,
        prices={SIMULATED_MODEL: PRICE},
    )
    with served(settings) as srv:
        yield srv


def cold_keys(srv: ServedLab, session_id: str) -> list[str]:
    calls = httpx.get(f"{srv.base_url}/api/sessions/{session_id}").json()["calls"]
    return [call["metric_key"] for call in calls if call["cold_start"] is True]


@pytest.mark.browser
def test_compare_flags_cold_starts_and_shows_cost_of_a_real_run(
    browser: Browser, priced_lab: ServedLab
) -> None:
    page = open_page(browser, priced_lab)
    page.check("input[name=mode][value=dual_agent]", force=True)
    send(page, "Set the volume to 20")  # the server's first model call: cold
    wait_turn_done(page, 1)
    send(page, "Set the volume to 40")  # the same client, warm now
    wait_turn_done(page, 2)
    first = page.evaluate("sessionStorage.getItem('agentlab.session')")
    page.click("#new-session")
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    second = page.evaluate("sessionStorage.getItem('agentlab.session')")
    assert cold_keys(priced_lab, first) == ["chat:1:1"]
    assert cold_keys(priced_lab, second) == []

    page.click(".tab[data-view=timeline]")
    expect(page.locator(".turn-summary .chip", has_text="cost")).to_contain_text("$")
    page.click(".tab[data-view=compare]")
    page.select_option("#compare-a", first)
    page.select_option("#compare-b", second)
    column_a, column_b = page.locator("#compare-col-a"), page.locator("#compare-col-b")
    rows = column_a.locator(".turn-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".cold")).to_have_count(1)
    expect(rows.nth(1).locator(".cold")).to_have_count(0)
    expect(column_b.locator(".turn-table .cold")).to_have_count(0)
    expect(column_b.locator(".cold-note")).to_contain_text("cold start in A")
    expect(column_b.locator(".metric", has_text="cost")).to_contain_text("$")
    expect(column_a.locator(".turn-table tbody tr td").last).to_contain_text("$")
    page.context.close()


def test_a_session_with_its_own_endpoint_starts_cold_also_after_a_restart(
    lab_home: Path,
) -> None:
    provider = SSETranscriptServer(chat_reply("one"), chat_reply("two"), chat_reply("three"))
    with provider, served(lab_settings(lab_home)) as srv:
        for session_id, connection in (
            ("shared-1", None),
            ("shared-2", None),
            ("own", {"base_url": provider.base_url, "api_key": SECRET}),
        ):
            extra: dict[str, Any] = {"connection": connection} if connection else {}
            with connect(f"{srv.ws_url}/ws/sessions/{session_id}", proxy=None) as ws:
                ws.send(json.dumps(start_message(lab_of(srv), "hello", **extra)))
                frames_until(ws, of_type("turn_completed"))
                ws.send(json.dumps({"type": "user", "content": "again"}))
                frames_until(ws, of_type("turn_completed"))
        flagged = {name: cold_keys(srv, name) for name in ("shared-1", "shared-2", "own")}
    with served(lab_settings(lab_home)) as restarted:  # the flag is stored with the turn
        reopened = {name: cold_keys(restarted, name) for name in flagged}
    assert flagged == {"shared-1": ["chat:1:1"], "shared-2": [], "own": ["chat:1:1"]}
    assert reopened == flagged


@pytest.mark.browser
def test_a_request_too_large_for_the_server_is_said_and_the_page_recovers(
    browser: Browser, lab_home: Path
) -> None:
    with served(lab_settings(lab_home), ws_max_size=300_000) as srv:
        page = open_page(browser, srv)
        page.fill("#system-prompts", "x" * 400_000)
        send(page, "Set the volume to 20")
        error = page.locator("#composer-input-error")
        expect(error).to_contain_text("too large for the server")
        expect(page.locator("#status")).to_have_text("not started")  # not "reconnecting…"
        expect(page.locator("#composer-input")).to_have_value("Set the volume to 20")
        page.fill("#system-prompts", "You are terse.")
        page.press("#composer-input", "Enter")
        wait_turn_done(page, 1)
        expect(page.locator(".msg.user")).to_have_count(1)
        expect(page.locator(".msg.user")).to_contain_text("Set the volume to 20")
        page.context.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.browser
def test_keys_and_url_credentials_never_show_in_the_page(browser: Browser, lab_home: Path) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    echo = f"bad key {SECRET.upper()} ({encoded})"
    provider = SSETranscriptServer(fallback=ScriptedResponse.error(401, {"error": echo}))
    credentials = f"http://alice:pa55w0rd-XYZ@127.0.0.1:{closed_port()}/v1?api-key=QWERTY-9876"
    with provider, served(lab_settings(lab_home, max_retries=0)) as srv:
        page = open_page(browser, srv)
        page.fill("#base-url", provider.base_url)
        page.fill("#api-key", SECRET)
        send(page, "Set the volume to 20")
        expect(page.locator(".msg.error")).to_contain_text("bad key ***")
        shown = [page.inner_text("body")]
        page.click("#new-session")
        page.fill("#base-url", credentials)
        page.fill("#api-key", "")
        send(page, "Set the volume to 30")
        expect(page.locator(".msg.error")).to_have_count(1, timeout=20_000)
        shown.append(page.inner_text("body"))
        page.click(".tab[data-view=sessions]")
        expect(page.locator("#sessions-body tr")).to_have_count(2)
        page.locator("#sessions-body tr button", has_text="Open").first.click()
        expect(page.locator(".msg.error")).to_have_count(1)
        shown.append(page.inner_text("body"))
        page.context.close()
    text = "\n".join(shown)
    assert "bad key ***" in text
    for leaked in (SECRET, SECRET.upper(), SECRET.lower(), encoded, "pa55w0rd", "QWERTY-9876"):
        assert leaked not in text


@pytest.mark.browser
def test_a_cancelled_session_is_named_so_in_the_list(browser: Browser, lab_home: Path) -> None:
    settings = lab_settings(lab_home, simulated_ttft_ms=1500, simulated_tokens_per_second=20)
    with served(settings) as srv:
        page = open_page(browser, srv)
        send(page, "Tell me a long story about write-ahead logs")
        expect(page.locator("#status")).to_have_text("running")
        page.click("#cancel-turn")
        expect(page.locator(".msg.error")).to_contain_text("cancelled", timeout=20_000)
        page.click(".tab[data-view=sessions]")
        row = page.locator("#sessions-body tr", has_text="write-ahead logs")
        expect(row.locator(".status")).to_have_text("cancelled")
        page.select_option("#sessions-filter", "failed")  # "failed or cancelled"
        expect(page.locator("#sessions-body tr .status")).to_have_text(["cancelled"])
        page.context.close()


@pytest.mark.browser
def test_a_start_error_is_brought_into_view_on_a_phone(browser: Browser, lab_home: Path) -> None:
    with served(lab_settings(lab_home)) as srv:
        page = browser.new_context(viewport=PHONE).new_page()
        page.goto(srv.base_url + "/")
        expect(page.locator("#tool-list input")).not_to_have_count(0)
        page.fill("#chat-temperature", "7")
        page.evaluate("window.scrollTo(0, 0)")  # back at the conversation, above the settings
        send(page, "Set the volume to 25")
        error = page.locator("#chat-temperature-error")
        expect(error).to_have_text("temperature: Input should be less than or equal to 2")
        box = error.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]
        assert box["x"] + box["width"] <= PHONE["width"]
        expect(page.locator("#chat-temperature")).to_be_focused()
        expect(page.locator("#composer-input")).to_have_value("Set the volume to 25")
        page.context.close()


@pytest.mark.browser
def test_a_tab_back_after_its_session_was_deleted_is_told_so(
    browser: Browser, lab_home: Path
) -> None:
    with served(lab_settings(lab_home)) as srv:
        page = open_page(browser, srv)
        send(page, "Set the volume to 15")
        wait_turn_done(page, 1)
        page.click("#end-session")
        expect(page.locator("#status")).to_have_text("ended")
        session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")
        page.goto("about:blank")  # the tab is away (closed socket) while another deletes
        assert httpx.delete(f"{srv.base_url}/api/sessions/{session_id}").status_code == 204
        page.goto(srv.base_url + "/")
        expect(page.locator(".notice", has_text="was deleted")).to_have_count(1)
        expect(page.locator("#status")).to_have_text("deleted")
        send(page, "Are you still there?")
        expect(page.locator("#toast")).to_contain_text("deleted")
        listed = httpx.get(f"{srv.base_url}/api/sessions").json()["sessions"]
        assert listed == []  # not re-created as turn 1
        page.context.close()
