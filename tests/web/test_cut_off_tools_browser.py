"""The web lab's waterfall draws a batch cut off by a cancel as it ran, in Chromium.

The record and audits come from a real cancelled session on a real SQLite file: one call
finished (its latency was measured), the other was still running when the turn was
cancelled. The page's own timeline module draws them: the finished call's bar lasts
exactly its measured latency, the running one's lasts until the turn ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from agent_lab.application.record import session_records
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text
from tests.runtime.runtime_helpers import read_until
from tests.runtime.test_cut_off_batch_metrics import _call, _registry, _request
from tests.web.test_browser import browser, lab_page
from tests.web.web_support import ServedLab, lab_settings, served

pytestmark = pytest.mark.browser
__all__ = ["browser"]

BARS = """async ([audits, record]) => {
  const { buildTimeline } = await import("/static/timeline.js");
  const model = buildTimeline(audits, record);
  return {
    total: model.total,
    tools: model.items.filter((item) => item.kind === "tool")
      .map((item) => ({ label: item.label, start: item.start, end: item.end })),
  };
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    with served(lab_settings(tmp_path_factory.mktemp("cut-off-lab"))) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, lab: ServedLab) -> Iterator[Page]:
    yield from lab_page(browser, lab)


async def _cancelled_session(path: Path, mode: str) -> None:
    store = SQLiteSessionStore(path)
    started = asyncio.Event()
    calls = [_call(mode, "a", "fast", n=1), _call(mode, "b", "hang", n=2)]
    client = ScriptedChatClient([calls, text("unused")])
    runtime = DebugRuntime(client, registry=_registry(started), session_store=store)
    queues = runtime.start_session(_request(mode, parallel=2))
    await asyncio.wait_for(started.wait(), timeout=5)
    await asyncio.sleep(0.2)  # ``fast`` (30 ms) has finished; ``hang`` runs on
    assert runtime.cancel_turn()
    await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    store.close()


def _stored(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with SQLiteSessionStore(path) as store:
        audits = store.list_audit_logs("s1")
        (record,) = session_records(audits, session_id="s1", turns=store.list_turns("s1"))
    return [dict(audit) for audit in audits], record.model_dump(mode="json")


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_a_call_that_finished_before_the_cancel_lasts_its_latency(
    page: Page, tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "lab.sqlite3"
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        pool.submit(asyncio.run, _cancelled_session(path, mode)).result()
    audits, record = _stored(path)
    latency = {tool["event_id"]: tool["latency_ms"] for tool in record["tool_executions"]}
    assert latency["a"] is not None and latency["b"] is None

    drawn = page.evaluate(BARS, [audits, record])

    bars = {bar["label"]: bar for bar in drawn["tools"]}
    fast, hang = bars["fast"], bars["hang"]
    assert fast["end"] - fast["start"] == latency["a"]
    assert hang["end"] == drawn["total"]  # still running when the turn ended
    assert fast["end"] < hang["end"]
