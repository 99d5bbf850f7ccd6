"""What a new user changes in the configuration panel reaches the next turn, in headless
Chromium against a real server: settings changed while a session is idle (a live one and
a reopened one), sessions whose turns ran in both tool modes, numbers out of range."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.web.test_browser import CHROMIUM_ARGS, browser, send, wait_turn_done
from tests.web.test_first_steps_browser import lab, page, session_id
from tests.web.test_hardening import lab_of
from tests.web.web_support import ServedLab

pytestmark = pytest.mark.browser
__all__ = ["CHROMIUM_ARGS", "browser", "lab", "page"]  # fixtures shared with other tests


def chat_requests(lab: ServedLab, session: str) -> list[dict[str, Any]]:
    """Per turn, the first chat request's parameters and mode, as audited."""
    audits = httpx.get(f"{lab.base_url}/api/sessions/{session}").json()["audit"]
    firsts: dict[int, dict[str, Any]] = {}
    for audit in audits:
        if audit["event"] == "chat_agent_request":
            details = audit["details"]
            shown = {**details["params"], "mode": details["tool_invocation_mode"]}
            firsts.setdefault(audit["turn_index"], shown)
    return [firsts[turn] for turn in sorted(firsts)]


def test_settings_changed_while_a_live_session_is_idle_apply_to_its_next_turn(
    page: Page, lab: ServedLab
) -> None:
    send(page, "Set the volume to 20")
    wait_turn_done(page, 1)
    hint = page.locator("#settings-hint")
    expect(hint).to_contain_text("runs with these settings")
    page.check("input[name=mode][value=chat_agent_tools]", force=True)
    page.fill("#chat-temperature", "1.3")
    expect(hint).to_contain_text("Changed: mode, chat temperature")
    send(page, "Set the volume to 30")
    wait_turn_done(page, 2)
    changed = page.locator(".notice", has_text="Settings changed (mode, chat temperature)")
    expect(changed).to_have_count(1)
    expect(page.locator(".turn[data-turn='2'] .mode-change")).to_contain_text("chat_agent_tools")
    expect(hint).to_contain_text("runs with these settings")
    requests = chat_requests(lab, session_id(page))
    assert [(r["mode"], r["temperature"]) for r in requests] == [
        ("dual_agent", 0.7),
        ("chat_agent_tools", 1.3),
    ]

    # The session is named by the modes its turns ran in, here and in the list.
    mixed = "mixed (dual_agent → chat_agent_tools)"
    expect(page.locator("#conv-usage .badge")).to_have_text(mixed)
    expect(page.locator("#mode-hint")).to_contain_text(mixed)
    expect(page.locator("#mode-hint")).to_contain_text("applies from the next turn")
    page.reload()  # the panel shows what the session runs with now, not its first request
    expect(page.locator("#status")).to_have_text("live")
    expect(page.locator("input[name=mode][value=chat_agent_tools]")).to_be_checked()
    expect(page.locator("#chat-temperature")).to_have_value("1.3")
    page.click(".tab[data-view=sessions]")
    row = page.locator(f"#sessions-body tr[data-session='{session_id(page)}']")
    expect(row.locator(".badge")).to_have_text(mixed)
    for mode in ("dual_agent", "chat_agent_tools", "mixed"):
        page.select_option("#sessions-filter", mode)
        expect(row).to_have_count(1)


def test_a_session_ready_to_continue_runs_with_the_settings_the_panel_shows(
    page: Page, lab: ServedLab
) -> None:
    stored = lab_of(lab).request("").model_dump(mode="json", exclude={"session_id", "user_message"})
    with SQLiteSessionStore(lab_of(lab).settings.database()) as store:  # no runtime ran it yet
        store.create_session("Waiting for its first turn", stored, session_id="waiting")
    page.click(".tab[data-view=sessions]")
    page.locator("#sessions-body tr[data-session='waiting'] button", has_text="Open").click()
    expect(page.locator("#status")).to_have_text("ready to continue")
    page.fill("#chat-temperature", "0.2")  # after the page attached with the stored ones
    send(page, "Set the volume to 30")
    wait_turn_done(page, 1)
    assert [r["temperature"] for r in chat_requests(lab, "waiting")] == [0.2]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("#max-parallel-events", "0", "greater than or equal to 1"),
        ("#max-event-loops", "-1", "greater than or equal to 0"),
        ("#max-event-loops", "2.5", "valid integer"),
    ],
)
def test_an_out_of_range_number_is_refused_under_its_field(
    page: Page, field: str, value: str, says: str
) -> None:
    page.fill(field, value)
    send(page, "Set the volume to 25")
    error = page.locator(f"{field}-error")
    expect(error).to_contain_text(says)
    expect(page.locator(field)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#composer-input")).to_have_value("Set the volume to 25")
    expect(page.locator("#status")).to_have_text("not started")
