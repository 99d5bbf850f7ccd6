"""``atomic_writes()``: several store writes committed as one SQLite transaction.

The runtime commits each durable write together with the audits buffered before it;
these tests pin what the block promises on a real SQLite file: all or nothing, each
write still all or nothing on its own, and no in-memory knowledge (stored audit values,
claim tokens) kept from a group that rolled back.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_lab.domain.errors import PersistenceFailed, SessionBusy, UsageError
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import assistant, user


def _open(tmp_path: Path) -> SQLiteSessionStore:
    store = SQLiteSessionStore(tmp_path / "atomic.sqlite3")
    store.create_session("atomic", {}, session_id="s")
    return store


def _request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": messages, "params": {"model": "m", "note": "x" * 300}}


def commit_frames(path: Path) -> int:
    """Commit records in the file's WAL (of its current generation): one per
    transaction that changed the database since the last checkpoint."""
    data = Path(f"{path}-wal").read_bytes()
    if len(data) < 32:
        return 0
    page_size = int.from_bytes(data[8:12], "big")
    salts = data[16:24]
    commits, offset = 0, 32
    while offset + 24 + page_size <= len(data):
        header = data[offset : offset + 24]
        if header[8:16] != salts:
            break
        commits += int.from_bytes(header[4:8], "big") != 0
        offset += 24 + page_size
    return commits


def test_the_writes_of_a_block_commit_together_as_one_transaction(tmp_path: Path) -> None:
    store = _open(tmp_path)
    before = commit_frames(store.path)
    with store.atomic_writes():
        store.append_audits("s", [(1, "turn_started", {"turn_index": 1})])
        store.start_turn("s", 1, "hi", messages=[user("hi")])
        store.append_messages("s", 1, [assistant("hello")])
    assert commit_frames(store.path) == before + 1
    assert [m["content"] for m in store.list_messages("s")] == ["hi", "hello"]
    assert [a["event"] for a in store.list_audit_logs("s")] == ["turn_started"]

    store.append_audits("s", [(1, "turn_completed", {})])  # outside a block: its own
    assert commit_frames(store.path) == before + 2
    store.close()


def test_an_exception_leaving_the_block_rolls_every_write_back(tmp_path: Path) -> None:
    store = _open(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), store.atomic_writes():
        store.append_audits("s", [(1, "turn_started", {})])
        store.start_turn("s", 1, "hi", messages=[user("hi")])
        raise RuntimeError("boom")
    assert store.list_audit_logs("s") == []
    assert store.list_turns("s") == []
    assert store.list_messages("s") == []
    store.start_turn("s", 1, "hi again")  # the turn was never written
    assert [t["user_message"] for t in store.list_turns("s")] == ["hi again"]
    store.close()


def test_a_failed_write_caught_inside_still_rolls_the_block_back(tmp_path: Path) -> None:
    store = _open(tmp_path)
    store.start_turn("s", 1, "hi")
    with pytest.raises(UsageError, match="rolled back"), store.atomic_writes():
        store.append_messages("s", 1, [assistant("not kept")])
        with pytest.raises(UsageError, match="already exists"):
            store.start_turn("s", 1, "again", messages=[user("not kept either")])
        store.append_messages("s", 1, [assistant("nor this")])
    assert store.list_messages("s") == []
    store.append_messages("s", 1, [assistant("the store still works")])
    assert [m["content"] for m in store.list_messages("s")] == ["the store still works"]
    store.close()


def test_values_of_a_rolled_back_block_are_stored_again_later(tmp_path: Path) -> None:
    """Audit values are stored once and referenced; a group that rolled back must not
    leave the store believing they are stored."""
    store = _open(tmp_path)
    first = [{"role": "user", "content": "a long question " * 40}]
    with pytest.raises(RuntimeError), store.atomic_writes():
        store.append_audits("s", [(1, "chat_agent_request", _request(first))])
        raise RuntimeError("rolled back")
    second = [*first, {"role": "assistant", "content": "an answer " * 40}]
    store.append_audits("s", [(1, "chat_agent_request", _request(second))])
    store.close()

    reopened = SQLiteSessionStore(tmp_path / "atomic.sqlite3")
    [audit] = reopened.list_audit_logs("s")
    assert audit["details"] == _request(second)
    reopened.close()


def test_a_claim_released_in_a_rolled_back_block_still_fences(tmp_path: Path) -> None:
    store = _open(tmp_path)
    token = store.claim_session("s", owner="one")
    with pytest.raises(RuntimeError), store.atomic_writes():
        store.release_claim("s", token)
        raise RuntimeError("rolled back")
    other = SQLiteSessionStore(tmp_path / "atomic.sqlite3")
    with pytest.raises(SessionBusy, match="one"):
        other.claim_session("s", owner="two")  # the claim is still the first store's
    other.close()
    # Another runtime takes the session over: the first store's writes are fenced.
    side = sqlite3.connect(store.path, isolation_level=None)
    side.execute("UPDATE session_claims SET token = 'new', owner = 'three' WHERE session_id = 's'")
    side.close()
    with pytest.raises(PersistenceFailed) as fenced:
        store.start_turn("s", 1, "no longer ours")
    assert fenced.value.reason == "taken_over"
    store.close()


def test_blocks_do_not_nest(tmp_path: Path) -> None:
    store = _open(tmp_path)
    with (
        store.atomic_writes(),
        pytest.raises(UsageError, match="do not nest"),
        store.atomic_writes(),
    ):
        pass
    store.start_turn("s", 1, "the store still works")
    store.close()


def test_other_threads_wait_for_the_block(tmp_path: Path) -> None:
    store = _open(tmp_path)
    seen: list[list[str]] = []
    entered, release = threading.Event(), threading.Event()

    def reader() -> None:
        entered.wait(5)
        seen.append([m["content"] for m in store.list_messages("s")])

    thread = threading.Thread(target=reader)
    thread.start()
    with store.atomic_writes():
        store.start_turn("s", 1, "hi", messages=[user("hi")])
        entered.set()
        release.wait(0.2)  # the reader is blocked meanwhile, not reading half a group
        store.append_messages("s", 1, [assistant("hello")])
    thread.join(5)
    assert seen == [["hi", "hello"]]
    store.close()


def test_a_held_lock_fails_the_block_before_any_write(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "atomic.sqlite3", busy_timeout_ms=100)
    store.create_session("atomic", {}, session_id="s")
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    ran: list[str] = []
    with pytest.raises(PersistenceFailed) as failed, store.atomic_writes():
        ran.append("inside")
    holder.execute("ROLLBACK")
    holder.close()
    assert failed.value.reason == "locked"
    assert ran == []
    store.close()
