"""The same dual_agent turn in Arize Phoenix and in the web lab's timeline, side by side.

The web lab runs with ``agent-lab serve --otel``; Chromium shows the turn in the lab's
timeline and then its trace in Phoenix's own UI. With ``AGENT_LAB_SCREENSHOTS=1`` the
pictures go to ``docs/screenshots/`` (else to a temporary folder).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Page, ViewportSize, expect, sync_playwright

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.telemetry.export import session_spans
from agent_lab.infrastructure.telemetry.spans import trace_id_of
from tests.telemetry.phoenix_server import ROOT, trace_spans
from tests.telemetry.telemetry_support import PROMPT

pytestmark = [pytest.mark.phoenix, pytest.mark.browser, pytest.mark.timeout(600)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
VIEWPORT: ViewportSize = {"width": 1400, "height": 860}


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    if os.environ.get("AGENT_LAB_SCREENSHOTS") == "1":
        return ROOT / "docs" / "screenshots"
    return tmp_path


@pytest.fixture
def lab(tmp_path: Path, phoenix: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``agent-lab serve --otel`` on the simulated model (its default latency)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "AGENT_LAB_", "OPENAI_"))
        },
        "AGENT_LAB_HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_METRICS_EXPORTER": "none",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_lab", "serve", "--port", str(port), "--otel"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    try:
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _turn_in_the_timeline(page: Page, url: str) -> str:
    page.goto(url + "/")
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    page.fill("#composer-input", PROMPT)
    page.press("#composer-input", "Enter")
    expect(page.locator(".stats")).to_have_count(2, timeout=30_000)
    expect(page.locator("#status")).to_have_text("live", timeout=30_000)
    page.click(".tab[data-view=timeline]")
    page.select_option("#timeline-turn", "1")
    expect(page.locator(".wf-bar.wf-chat")).not_to_have_count(0)
    expect(page.locator(".wf-bar.wf-tool")).to_have_count(3)
    return str(page.evaluate("sessionStorage.getItem('agentlab.session')"))


def test_the_dual_agent_turn_in_phoenix_next_to_the_labs_timeline(
    phoenix: str, lab: tuple[str, subprocess.Popen[str]], tmp_path: Path, shots: Path
) -> None:
    url, process = lab
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_context(viewport=VIEWPORT).new_page()
        session_id = _turn_in_the_timeline(page, url)
        page.screenshot(path=str(shots / "telemetry-timeline.png"))
        process.send_signal(signal.SIGINT)  # the lab closes the session: its span goes out
        process.wait(timeout=30)
        assert process.returncode == 0
        with SQLiteSessionStore(tmp_path / "agent-lab.sqlite3") as store:
            expected = session_spans(store, session_id)
        trace = f"{trace_id_of(session_id):032x}"
        assert len(trace_spans(phoenix, trace, len(expected))) == len(expected)

        page.goto(f"{phoenix}/redirects/traces/{trace}")
        expect(page.get_by_text("invoke_agent event_agent").first).to_be_visible(timeout=30_000)
        expect(page.get_by_text("execute_tool knowledge.web.search").first).to_be_visible()
        page.get_by_text("chat agent-lab-sim").first.click()
        expect(page.get_by_text("gen_ai.usage.input_tokens").first).to_be_attached(timeout=30_000)
        page.screenshot(path=str(shots / "telemetry-phoenix.png"))
        browser.close()
    _side_by_side(shots / "telemetry-phoenix.png", shots / "telemetry-timeline.png", shots)


def _side_by_side(left: Path, right: Path, shots: Path) -> None:
    images = [Image.open(left), Image.open(right)]
    width = sum(image.width for image in images) + 16
    height = max(image.height for image in images)
    combined = Image.new("RGB", (width, height), "white")
    combined.paste(images[0], (0, 0))
    combined.paste(images[1], (images[0].width + 16, 0))
    combined.save(shots / "telemetry-side-by-side.png", optimize=True)
