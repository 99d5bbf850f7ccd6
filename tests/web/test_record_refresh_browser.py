"""What the page downloads after a turn, in headless Chromium: only the audits stored
after the ones it holds (``audit_after``), not the session's whole trail again, and it
still shows what a reload shows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Response, expect

from tests.web.test_browser import browser, lab, lab_page, send, wait_turn_done
from tests.web.web_support import ServedLab

pytestmark = pytest.mark.browser
__all__ = ["browser", "lab"]


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


def shown(page: Page) -> list[str | None]:
    users = page.locator("#messages .turn .msg.user")
    return [users.nth(i).text_content() for i in range(users.count())]


def is_record_fetch(response: Response) -> bool:
    return "/api/sessions/" in response.url and response.request.method == "GET"


def test_after_a_turn_the_page_fetches_only_the_new_audits(page: Page) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    page.reload()  # the page now holds the stored trail from its `history` frame
    expect(page.locator("#status")).to_have_text("live", timeout=20_000)
    expect(page.locator('#messages .turn[data-turn="1"] .stats')).to_have_count(1)
    fetched: list[tuple[str, dict[str, Any]]] = []
    for turn, level in ((2, 30), (3, 40)):
        with page.expect_response(is_record_fetch, timeout=20_000) as refresh:
            send(page, f"Set the volume to {level}")
        fetched.append((refresh.value.url, refresh.value.json()))
        expect(page.locator(f'#messages .turn[data-turn="{turn}"] .stats')).to_have_count(1)
        expect(page.locator("#status")).to_have_text("live", timeout=20_000)
    live = shown(page)
    page.reload()
    expect(page.locator('#messages .turn[data-turn="3"] .stats')).to_have_count(1, timeout=20_000)

    url, last = fetched[-1]
    assert "audit_after=" in url
    turns_of_audits = {audit.get("turn_index") for audit in last["audit"]}
    assert turns_of_audits and turns_of_audits <= {3, None}  # turn 3's only
    assert [row["turn_index"] for row in last["records"]] == [1, 2, 3]
    assert len(live) == 3 and shown(page) == live
