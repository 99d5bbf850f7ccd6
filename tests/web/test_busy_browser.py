"""A tab whose session another runtime drives (another process on the same SQLite
store), in headless Chromium: the refused message is said under the composer, outside
any turn, and the composer gets it back; the other runtime's turn stays shown as
running, with no error under it, also after a reload; once the other runtime has
finished, the next *Send* goes through."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_fixtures import model, settings
from tests.web.busy_holder import HOLDER_MESSAGE, TOOL, Holder
from tests.web.test_browser import browser, lab_page, send, wait_turn_done
from tests.web.web_support import ServedLab, served

pytestmark = pytest.mark.browser
__all__ = ["browser", "model", "settings"]
TYPED = "Set the volume to 70"
BUSY = "is being driven by another runtime"
ENDED_NOTE = "Session ended. Send a message to continue it."


@pytest.fixture
def lab(settings: LabSettings) -> Iterator[ServedLab]:
    with served(settings) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


def assert_refused(page: Page, holder: Holder, status: str) -> None:
    """The refusal under the composer, naming the holder; the typed message back."""
    refusal = page.locator("#composer-input-error")
    expect(refusal).to_contain_text(BUSY, timeout=20_000)
    expect(refusal).to_contain_text(f"pid {holder.pid}")
    expect(page.locator("#composer-input")).to_have_value(TYPED)
    expect(page.locator("#status")).to_have_text(status)
    assert page.locator(f"#messages :text('{BUSY}')").count() == 0  # not in the conversation


def assert_held_turn_running(page: Page) -> None:
    """Turn 2 is the other runtime's, still running, and nothing says a turn failed."""
    held = page.locator('#messages .turn[data-turn="2"]')
    expect(held.locator(".msg.user")).to_contain_text(HOLDER_MESSAGE)
    expect(held.locator(".call", has_text=TOOL)).to_have_attribute("data-status", "running")
    expect(page.locator("#messages .msg.error")).to_have_count(0)
    expect(page.locator("#messages .notice", has_text=ENDED_NOTE)).to_have_count(1)  # turn 1's
    expect(page.locator("#messages .turn")).to_have_count(2)


def test_a_refused_send_keeps_the_message_and_goes_through_once_the_holder_is_done(
    page: Page, lab: ServedLab, settings: LabSettings, model: SSETranscriptServer
) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    page.click("#end-session")
    expect(page.locator("#status")).to_have_text("ended", timeout=20_000)
    session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")

    with Holder(settings.database(), model.base_url, session_id) as holder:
        send(page, TYPED)  # from an ended session: a `start` carrying the message
        assert_refused(page, holder, "not started")
        assert_held_turn_running(page)

        page.reload()  # the same after a reload; its Send (a first `user`) is refused too
        expect(page.locator("#status")).to_have_text("ready to continue", timeout=20_000)
        assert_held_turn_running(page)
        send(page, TYPED)
        assert_refused(page, holder, "ready to continue")
        assert_held_turn_running(page)

        holder.release()

    page.click("#send")  # the message the composer got back
    expect(page.locator('#messages .turn[data-turn="3"] .msg.user')).to_have_text(
        f"You · turn 3{TYPED}", timeout=20_000
    )
    expect(page.locator('#messages .turn[data-turn="3"] .stats')).to_have_count(1)
    expect(page.locator("#status")).to_have_text("live")
    expect(page.locator("#composer-input")).to_have_value("")
    expect(page.locator("#composer-input-error")).to_have_count(0)
    expect(page.locator("#messages .msg.error")).to_have_count(0)
    held = page.locator('#messages .turn[data-turn="2"] .call', has_text=TOOL)
    expect(held).to_have_attribute("data-status", "done")
