"""A runtime that loses its writer claim ends its session with a clear reason.

Two runtimes on one real SQLite file: the first one stalls past its lease (its claim
renewals hang, as in a process stopped with SIGSTOP), the second one takes the session
over and runs a turn, and when the first one's renewal finally goes through it learns
that its claim is gone and ends with ``session_persistence_failed:taken_over``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application import _claim_lease
from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text
from tests.runtime.runtime_helpers import read_until

LEASE = 1.5


class _StalledRenewals(SQLiteSessionStore):
    """A store whose claim renewals hang until ``resume`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.resume = threading.Event()
        self.renewing = threading.Event()

    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None:
        self.renewing.set()
        self.resume.wait(timeout=120)
        super().renew_claim(session_id, token, lease_seconds=lease_seconds)


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_claim_lease, "LEASE_SECONDS", LEASE)


@pytest.fixture
def stalled(tmp_path: Path) -> Iterator[_StalledRenewals]:
    store = _StalledRenewals(tmp_path / "shared.sqlite3")
    yield store
    store.resume.set()
    store.close()


def _request(message: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id="shared", user_message=message, chat_agent=AgentParams(model="m")
    )


@pytest.mark.asyncio
@pytest.mark.usefixtures("short_lease")
async def test_the_stale_runtime_ends_as_taken_over_and_the_new_owner_keeps_its_rows(
    tmp_path: Path, stalled: _StalledRenewals
) -> None:
    stale = DebugRuntime(ScriptedChatClient([text("first answer")]), session_store=stalled)
    try:
        ended, turns, contents = await _take_over(tmp_path, stalled, stale)
    finally:
        stalled.resume.set()
        await stale.aclose()

    error = ended[-1]
    assert error["failure_reason"] == "session_persistence_failed:taken_over"
    assert "taken over by another runtime" in error["message"]
    assert "this claim was lost" in error["message"]
    assert [(t["turn_index"], t["status"]) for t in turns] == [(1, "completed"), (2, "completed")]
    assert contents == ["first", "first answer", "second", "second answer"]


async def _take_over(
    tmp_path: Path, stalled: _StalledRenewals, stale: DebugRuntime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Stall the first runtime past its lease, let a second one take the session over and
    run a turn, then wake the first one; its last outputs, the turns and the contents."""
    stale_out = stale.start_session(_request("first"))
    await read_until(stale_out, {"turn_completed"}, seconds=30)
    await asyncio.to_thread(stalled.renewing.wait, 30)  # stalled from here on

    with SQLiteSessionStore(tmp_path / "shared.sqlite3") as owner_store:
        owner = DebugRuntime(
            ScriptedChatClient([text("second answer")]),
            session_store=owner_store,
            claim_wait_seconds=60,  # until the stalled runtime's lease has run out
        )
        owner_out = owner.start_session(_request("second"))
        taken = await read_until(owner_out, {"turn_completed", "error"}, seconds=90)
        assert taken[-1]["type"] == "turn_completed", taken[-1]

        stalled.resume.set()  # the stale runtime wakes up
        ended = await read_until(stale_out, {"error"}, seconds=30)
        await asyncio.wait_for(stale.wait_closed(), timeout=30)
        assert not stale.running

        await owner.queues.input.put(None)
        await read_until(owner_out, {"done"}, seconds=30)
        await owner.aclose()
        turns = owner_store.list_turns("shared")
        contents = [m["content"] for m in owner_store.list_messages("shared")]

    return ended, turns, contents
