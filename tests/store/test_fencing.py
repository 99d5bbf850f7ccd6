"""Writes are fenced by the writer's claim: a runtime that lost its claim writes nothing.

Two stores on one real file stand for two runtimes; the first one's lease runs out, the
second takes the session over, and every write the first one tries afterwards fails as
``taken_over`` without touching the new owner's rows. The last test does the same with
a real child process stopped with ``SIGSTOP`` past its lease.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_support import assistant, call, metric, tool_reply, user

from agent_lab.domain.errors import PersistenceFailed, SessionBusy
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

SHORT_LEASE = 0.05


def _expire() -> None:
    time.sleep(SHORT_LEASE * 3)  # let the stale writer's lease run out


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SQLiteSessionStore, SQLiteSessionStore]]:
    path = tmp_path / "fenced.sqlite3"
    stale, owner = SQLiteSessionStore(path), SQLiteSessionStore(path)
    stale.create_session("fenced", {}, session_id="s")
    yield stale, owner
    stale.close()
    owner.close()


def _take_over(stale: SQLiteSessionStore, owner: SQLiteSessionStore) -> str:
    """The stale store claims the session and starts turn 1; the owner takes it over."""
    stale.claim_session("s", "stale runtime", lease_seconds=SHORT_LEASE)
    stale.start_turn("s", 1, "first", messages=[user("first")])
    _expire()
    token = owner.claim_session("s", "new owner")
    owner.complete_turn("s", 1, status="failed")
    owner.start_turn("s", 2, "second", messages=[user("second")])
    owner.append_messages("s", 2, [assistant("the new owner's answer")])
    owner.complete_turn("s", 2, status="completed", wall_time_ms=5, round_count=1)
    return token


def _snapshot(store: SQLiteSessionStore) -> Any:
    return (
        store.list_messages("s", include_pending=True),
        store.list_turns("s"),
        store.list_batches("s"),
        store.usage_summary("s"),
        store.list_audit_logs("s"),
    )


STALE_WRITES: dict[str, Callable[[SQLiteSessionStore], object]] = {
    "start_turn": lambda s: s.start_turn("s", 2, "stale", messages=[user("stale")]),
    "complete_turn": lambda s: s.complete_turn("s", 2, status="failed"),
    "append_messages": lambda s: s.append_messages("s", 2, [assistant("stale answer")]),
    "begin_batch": lambda s: s.begin_batch(
        "s", 2, 1, scope="round-1", mode="chat_agent_tools", events=[call("c9")]
    ),
    "append_audits": lambda s: s.append_audits("s", [(2, "stale_event", {"x": 1})]),
    "append_usages": lambda s: s.append_usages("s", [metric("chat:2:1")]),
    "delete_session": lambda s: s.delete_session("s"),
}


@pytest.mark.parametrize("write", sorted(STALE_WRITES))
def test_a_store_whose_claim_was_taken_over_writes_nothing(
    two: tuple[SQLiteSessionStore, SQLiteSessionStore], write: str
) -> None:
    stale, owner = two
    _take_over(stale, owner)
    before = _snapshot(owner)
    with pytest.raises(PersistenceFailed) as caught:
        STALE_WRITES[write](stale)
    assert caught.value.reason == "taken_over"
    assert caught.value.failure_reason == "session_persistence_failed:taken_over"
    assert "new owner" in str(caught.value)
    assert _snapshot(owner) == before
    assert owner.list_turns("s")[1]["status"] == "completed"


def test_journal_writes_of_a_batch_begun_before_the_takeover_are_fenced(
    two: tuple[SQLiteSessionStore, SQLiteSessionStore],
) -> None:
    stale, owner = two
    stale.claim_session("s", "stale runtime", lease_seconds=SHORT_LEASE)
    event = call("c1")
    batch = stale.begin_batch(
        "s",
        1,
        1,
        scope="round-1",
        mode="chat_agent_tools",
        events=[event],
        assistant=assistant("", event),
    )
    _expire()
    owner.claim_session("s", "new owner")  # cancels the batch left pending
    before = _snapshot(owner)
    attempts: list[Callable[[], None]] = [
        lambda: stale.record_result(batch, "c1", "succeeded", tool_reply(event)),
        lambda: stale.commit_batch(batch, [tool_reply(event)]),
        lambda: stale.abandon_batch(batch, "failed"),
    ]
    for attempt in attempts:
        with pytest.raises(PersistenceFailed) as caught:
            attempt()
        assert caught.value.reason == "taken_over"
    assert _snapshot(owner) == before


def test_renewing_a_lost_claim_reports_the_loss_and_writes_stay_fenced(
    two: tuple[SQLiteSessionStore, SQLiteSessionStore],
) -> None:
    stale, owner = two
    token = stale.claim_session("s", "stale runtime", lease_seconds=SHORT_LEASE)
    _expire()
    owner.claim_session("s", "new owner")
    with pytest.raises(SessionBusy, match="claim was lost.*new owner"):
        stale.renew_claim("s", token)
    with pytest.raises(PersistenceFailed, match="taken over"):
        stale.append_messages("s", 1, [user("late")])


def test_the_owner_and_a_store_that_reclaims_write_normally(
    two: tuple[SQLiteSessionStore, SQLiteSessionStore],
) -> None:
    stale, owner = two
    owner_token = _take_over(stale, owner)
    owner.release_claim("s", owner_token)
    stale.claim_session("s", "stale runtime, again")
    stale.start_turn("s", 3, "third", messages=[user("third")])
    assert [turn["turn_index"] for turn in stale.list_turns("s")] == [1, 2, 3]


def test_an_expired_claim_nobody_took_over_still_writes(
    two: tuple[SQLiteSessionStore, SQLiteSessionStore],
) -> None:
    stale, _ = two
    stale.claim_session("s", "slow runtime", lease_seconds=SHORT_LEASE)
    _expire()
    stale.start_turn("s", 1, "first", messages=[user("first")])
    assert stale.list_turns("s")[0]["status"] == "running"


_STOPPED_WRITER = """
import sys
from agent_lab.domain.errors import PersistenceFailed
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

path = sys.argv[1]
store = SQLiteSessionStore(path)
store.claim_session("s", "child runtime", lease_seconds=0.2)
store.start_turn("s", 1, "first", messages=[ChatMessage(role="user", content="first")])
print("claimed", flush=True)
sys.stdin.readline()  # the parent stops this process here, past its lease, then resumes it
try:
    store.complete_turn("s", 1, status="failed")
    store.start_turn("s", 2, "stale", messages=[ChatMessage(role="user", content="stale")])
    print("wrote", flush=True)
except PersistenceFailed as exc:
    print(exc.failure_reason, flush=True)
"""


def test_a_process_stopped_past_its_lease_cannot_overwrite_the_new_owner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "stopped.sqlite3"
    with SQLiteSessionStore(path) as owner:
        owner.create_session("fenced", {}, session_id="s")
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_STOPPED_WRITER), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "claimed"
            child.send_signal(signal.SIGSTOP)
            time.sleep(0.5)  # past the child's lease
            owner.claim_session("s", "new owner", wait_seconds=5)
            owner.complete_turn("s", 1, status="completed", wall_time_ms=1, round_count=1)
            owner.start_turn("s", 2, "second", messages=[user("second")])
            owner.complete_turn("s", 2, status="completed", wall_time_ms=1, round_count=1)
            child.send_signal(signal.SIGCONT)
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "session_persistence_failed:taken_over"
        finally:
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()
        turns = owner.list_turns("s")
        assert [(t["turn_index"], t["status"]) for t in turns] == [
            (1, "completed"),
            (2, "completed"),
        ]
        assert [m["content"] for m in owner.list_messages("s")] == ["first", "second"]
