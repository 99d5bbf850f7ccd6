"""The web lab's live token total (the header's "N tokens so far") counts every model call
of the turn, the event agent's argument calls included, so it equals what the reopened
session says (headless Chromium, a real SSE server with usage on every call)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.web.test_browser import browser, lab_page, send, wait_turn_done
from tests.web.web_support import ServedLab, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]

# Every text the header (#conv-usage) is given, in order, read as it is set.
RECORD_HEADER = """(() => {
  const replace = Element.prototype.replaceChildren;
  window.__header = [];
  Element.prototype.replaceChildren = function (...nodes) {
    replace.apply(this, nodes);
    if (this.id === "conv-usage") window.__header.push(this.textContent);
  };
})();"""


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion}}


def tool_call(call_id: str) -> dict[str, Any]:
    function = {"name": "orders__lookup", "arguments": json.dumps({"order_id": "A-17"})}
    call = {"index": 0, "id": call_id, "type": "function", "function": function}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


ANSWERS = {
    # chat (100+10), the forced argument call (50+5), the follow-up (200+20)
    "dual_agent": [
        ScriptedResponse.sse(
            delta("Checking. "), delta("<event>orders.lookup</event>"), usage(100, 10)
        ),
        ScriptedResponse.sse(tool_call("arg-1"), usage(50, 5)),
        ScriptedResponse.sse(delta("It shipped."), usage(200, 20)),
    ],
    # chat with the provider tool call (100+10), the follow-up (200+20): no argument call
    "chat_agent_tools": [
        ScriptedResponse.sse(delta("Checking. "), tool_call("call-1"), usage(100, 10)),
        ScriptedResponse.sse(delta("It shipped."), usage(200, 20)),
    ],
}


def orders_registry() -> ToolRegistry:
    """``orders.lookup``, with no argument resolver: dual mode generates its arguments."""
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    }
    return ToolRegistry(
        [
            ToolDefinition(
                name="orders.lookup",
                description="Look up an order.",
                parameters=schema,
                handler=lambda event: {"tool": event.name, "status": "shipped"},
            )
        ]
    )


@pytest.fixture(params=["dual_agent", "chat_agent_tools"])
def scripted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServedLab]]:
    mode: str = request.param
    with SSETranscriptServer(*ANSWERS[mode]) as model:
        settings = LabSettings(
            home=tmp_path / "home",
            base_url=model.base_url,
            model="scripted",
            max_retries=0,
            tools=["orders.lookup"],
        )
        with served(settings, registry=orders_registry()) as lab:
            yield mode, lab


@pytest.fixture
def page(browser: Browser, scripted: tuple[str, ServedLab]) -> Iterator[Page]:
    yield from lab_page(browser, scripted[1])


def tokens(text: str, suffix: str) -> int:
    found = re.search(r"([\d,]+) tokens?" + suffix, text)
    assert found is not None, text
    return int(found.group(1).replace(",", ""))


def test_the_live_token_total_equals_the_reopened_one(
    page: Page, scripted: tuple[str, ServedLab]
) -> None:
    mode = scripted[0]
    page.add_init_script(RECORD_HEADER)
    page.reload()
    expect(page.locator("#tool-list input")).not_to_have_count(0)
    page.check(f"input[name=mode][value={mode}]", force=True)
    send(page, "Where is order A-17?")
    wait_turn_done(page, 2)
    header = page.locator("#conv-usage")
    expect(header).to_contain_text("1 turn")
    shown: list[str] = page.evaluate("() => window.__header")
    live = tokens([text for text in shown if "so far" in text][-1], " so far")

    page.reload()
    expect(page.locator("#messages .msg.user")).to_have_count(1, timeout=20_000)
    expect(header).to_contain_text("1 turn")
    reopened = tokens(header.inner_text(), r"\b")

    assert live == reopened == (385 if mode == "dual_agent" else 330)
    # each round's chip is its chat call's, labelled so, live and reopened alike
    chips = page.locator(".stats .chip", has_text="chat tokens")
    expect(chips).to_have_text([re.compile(r"chat tokens\s*110"), re.compile(r"chat tokens\s*220")])
