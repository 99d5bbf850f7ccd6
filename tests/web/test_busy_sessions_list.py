"""The Sessions list of a session another process drives (a runtime in its own process
on the same SQLite store): it reads as live, naming that runtime, while the other
process holds the claim, and as not live once it released it — over a real uvicorn
server, and in headless Chromium (the live dot's tooltip, *Delete* disabled)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect
from websockets.sync.client import connect

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_fixtures import model, settings
from tests.web.busy_holder import Holder
from tests.web.test_browser import browser, lab_page, send, wait_turn_done
from tests.web.web_support import ServedLab, kind_of, served, start_message

__all__ = ["browser", "model", "settings"]
SESSION = "held"


def listed(srv: ServedLab, session_id: str) -> dict[str, Any]:
    sessions = httpx.get(f"{srv.base_url}/api/sessions").json()["sessions"]
    row: dict[str, Any] = next(s for s in sessions if s["id"] == session_id)
    return row


def test_a_session_another_process_drives_is_listed_live_naming_it(
    settings: LabSettings, model: SSETranscriptServer
) -> None:
    with served(settings) as srv:
        with Holder(settings.database(), model.base_url, SESSION) as holder:
            held = listed(srv, SESSION)
            holder.release()
        released = listed(srv, SESSION)

    assert (held["live"], held["live_elsewhere"]) == (True, True)
    assert f"pid {holder.pid}" in held["held_by"]
    assert (released["live"], released["live_elsewhere"], released["held_by"]) == (
        False,
        False,
        None,
    )


def test_a_session_this_lab_runs_is_live_here_not_elsewhere(settings: LabSettings) -> None:
    with served(settings) as srv:
        assert srv.lab is not None
        with connect(f"{srv.ws_url}/ws/sessions/{SESSION}", proxy=None) as ws:
            ws.send(json.dumps(start_message(srv.lab, "Set the volume to 20")))
            while kind_of(json.loads(ws.recv(timeout=30))) != "turn_completed":
                pass
            row = listed(srv, SESSION)

    assert (row["live"], row["live_elsewhere"]) == (True, False)
    assert row["held_by"] is not None  # this lab's own runtime holds the claim


@pytest.mark.browser
def test_the_sessions_view_names_the_other_runtime_and_refuses_delete(
    browser: Browser, settings: LabSettings, model: SSETranscriptServer
) -> None:
    with served(settings) as srv:
        for page in lab_page(browser, srv):
            send(page, "Set the volume to 20")
            wait_turn_done(page, 1)
            page.click("#end-session")
            expect(page.locator("#status")).to_have_text("ended", timeout=20_000)
            session_id = page.evaluate("sessionStorage.getItem('agentlab.session')")
            with Holder(settings.database(), model.base_url, session_id) as holder:
                page.click(".tab[data-view=sessions]")
                row = page.locator(f'#sessions-body tr[data-session="{session_id}"]')
                dot = row.locator(".live-dot")
                expect(dot).to_have_count(1, timeout=20_000)
                title = dot.get_attribute("title") or ""
                delete = row.locator("button", has_text="Delete")
                expect(delete).to_be_disabled()
                holder.release()
            page.click("#refresh-sessions")
            expect(row.locator(".live-dot")).to_have_count(0, timeout=20_000)
            expect(row.locator("button", has_text="Delete")).to_be_enabled()
    assert title.startswith("live in another process:")
    assert f"pid {holder.pid}" in title
