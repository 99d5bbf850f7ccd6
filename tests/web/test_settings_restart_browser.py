"""Settings changed while a live session is idle, in headless Chromium against a real
server: a change the server refuses ends nothing (the runtime goes on, the message
waits in the composer), and where the settings changed between turns is shown again
when the session is reopened, from its stored turns."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.web.test_browser import CHROMIUM_ARGS, browser, send, wait_turn_done
from tests.web.test_browser_checks import open_page
from tests.web.test_first_steps_browser import lab, open_stored, page, session_id
from tests.web.web_support import ServedLab

pytestmark = pytest.mark.browser
__all__ = ["CHROMIUM_ARGS", "browser", "lab", "page"]  # fixtures shared with other tests


def stored(lab: ServedLab, session: str) -> dict[str, Any]:
    record: dict[str, Any] = httpx.get(f"{lab.base_url}/api/sessions/{session}").json()
    return record


def runtime_events(record: dict[str, Any]) -> list[str]:
    """The session's runtime starts and ends, in the order they were stored."""
    ends = ("session_started", "session_finished")
    return [audit["event"] for audit in record["audit"] if audit["event"] in ends]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("#max-parallel-events", "0", "greater than or equal to 1"),
        ("#max-parallel-events", "99", "greater than 64"),
        ("#chat-temperature", "2.5", "less than or equal to 2"),
    ],
)
def test_a_refused_change_leaves_the_live_session_running_and_the_message_waiting(
    page: Page, lab: ServedLab, field: str, value: str, says: str
) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    before = page.locator(field).input_value()
    page.fill(field, value)
    send(page, "Set the volume to 30")
    expect(page.locator(f"{field}-error")).to_contain_text(says)
    expect(page.locator(field)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#composer-input")).to_have_value("Set the volume to 30")
    expect(page.locator("#status")).to_have_text("live")
    record = stored(lab, session_id(page))
    assert record["live"] is True
    assert runtime_events(record) == ["session_started"]

    page.fill(field, before)  # put right: the message goes to the same runtime
    page.press("#composer-input", "Enter")
    wait_turn_done(page, 2)
    expect(page.locator(".msg.user")).to_have_count(2)
    expect(page.locator(".notice", has_text="Settings changed")).to_have_count(0)
    assert runtime_events(stored(lab, session_id(page))) == ["session_started"]


def test_where_settings_changed_is_shown_again_when_the_session_is_reopened(
    page: Page, browser: Browser, lab: ServedLab
) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    page.fill("#chat-temperature", "1.3")
    send(page, "Set the volume to 30")
    wait_turn_done(page, 2)
    page.click("#end-session")  # ended and continued as it was: no settings changed
    expect(page.locator("#status")).to_have_text("ended")
    send(page, "Set the volume to 40")
    expect(page.locator(".stats")).to_have_count(3, timeout=20_000)
    expect(page.locator("#status")).to_have_text("live")
    page.fill("#max-event-loops", "2")
    send(page, "Set the volume to 50")
    wait_turn_done(page, 4)
    session = session_id(page)

    changed = ".notice.settings-change"
    for shown in (page, open_page(browser, lab)):  # this tab reloaded, and a fresh one
        if shown is page:
            page.reload()
        else:
            open_stored(shown, session)
        expect(shown.locator(".stats")).to_have_count(4)
        expect(shown.locator(changed)).to_have_count(2)
        expect(shown.locator(f".turn[data-turn='2'] {changed}")).to_have_text(
            "Settings changed (mode, chat temperature): the session went on with them from turn 2."
        )
        expect(shown.locator(f".turn[data-turn='4'] {changed}")).to_have_text(
            "Settings changed (event budget): the session went on with them from turn 4."
        )
    shown.context.close()
