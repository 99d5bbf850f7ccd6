"""One writer per session across processes: real child processes hold claims and die."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.domain.errors import SessionBusy
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import call, tool_reply, user

_HOLDER = """
import sys, time
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

path, session_id, mode = sys.argv[1:4]
store = SQLiteSessionStore(path)
token = store.claim_session(session_id, "child runtime", lease_seconds=30)
if mode == "batch":
    events = [ToolCallEvent(id="c1", name="t"), ToolCallEvent(id="c2", name="t")]
    batch = store.begin_batch(
        session_id, 1, 1, scope="crash:round-1", mode="chat_agent_tools", events=events,
        assistant=ChatMessage(role="assistant", content="", tool_calls=events),
    )
    store.record_result(batch, "c1", "succeeded",
                        ChatMessage(role="tool", content="done", tool_call_id="c1", name="t"))
print(token, flush=True)
if mode == "release-soon":
    time.sleep(0.3)
    store.release_claim(session_id, token)
    print("released", flush=True)
time.sleep(120)
"""


class _Holder:
    """A child process that claims a session and then sleeps."""

    def __init__(self, path: Path, session_id: str, mode: str = "hold") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_HOLDER), str(path), session_id, mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.token = self.process.stdout.readline().strip()
        assert self.token, self.process.stderr.read() if self.process.stderr else ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self, *, reap: bool = True) -> None:
        self.process.send_signal(signal.SIGKILL)
        if reap:
            self.process.wait()
        else:
            deadline = time.monotonic() + 5
            while _state(self.pid) != "Z" and time.monotonic() < deadline:
                time.sleep(0.01)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "claims.sqlite3") as opened:
        opened.create_session("claimed", {}, session_id="s")
        yield opened


@pytest.fixture
def holders() -> Iterator[list[_Holder]]:
    started: list[_Holder] = []
    yield started
    for holder in started:
        holder.close()


def test_a_live_process_keeps_the_session(
    store: SQLiteSessionStore, holders: list[_Holder]
) -> None:
    holder = _Holder(store.path, "s")
    holders.append(holder)
    with pytest.raises(SessionBusy) as raised:
        store.claim_session("s", "parent runtime")
    assert raised.value.session_id == "s"
    assert f"pid {holder.pid}" in str(raised.value)
    assert "child runtime" in raised.value.holder
    with pytest.raises(SessionBusy):
        store.claim_session("s", "parent runtime", wait_seconds=0.2)


def test_a_killed_process_loses_its_claim_at_once(
    store: SQLiteSessionStore, holders: list[_Holder]
) -> None:
    holder = _Holder(store.path, "s")
    holders.append(holder)
    holder.kill()
    # No waiting: the lease had 30 s left, yet the claim is taken over on the first try.
    token = store.claim_session("s", "parent runtime", wait_seconds=0)
    assert token != holder.token
    with pytest.raises(SessionBusy):
        store.renew_claim("s", holder.token)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_killed_process_not_yet_reaped_also_loses_its_claim(
    store: SQLiteSessionStore, holders: list[_Holder]
) -> None:
    holder = _Holder(store.path, "s")
    holders.append(holder)
    holder.kill(reap=False)
    assert _state(holder.pid) == "Z"
    store.claim_session("s", "parent runtime")


def test_waiting_for_a_process_that_releases(
    store: SQLiteSessionStore, holders: list[_Holder]
) -> None:
    holder = _Holder(store.path, "s", mode="release-soon")
    holders.append(holder)
    store.claim_session("s", "parent runtime", wait_seconds=30)
    assert holder.process.stdout is not None
    assert holder.process.stdout.readline().strip() == "released"


def test_a_crashed_batch_never_becomes_visible_and_its_calls_are_cancelled(
    store: SQLiteSessionStore, holders: list[_Holder]
) -> None:
    store.append_message("s", 1, user("before the crash"))
    holder = _Holder(store.path, "s", mode="batch")
    holders.append(holder)
    [pending] = store.list_batches("s")
    assert pending["state"] == "pending"
    holder.kill()
    assert [m["content"] for m in store.list_messages("s")] == ["before the crash"]
    store.claim_session("s", "next runtime")
    [batch] = store.list_batches("s")
    assert batch["state"] == "cancelled"
    assert [c["state"] for c in batch["calls"]] == ["succeeded", "cancelled"]
    assert batch["calls"][0]["result"] == tool_reply(call("c1", "t"), "done").model_dump()
    assert [m["content"] for m in store.list_messages("s")] == ["before the crash"]
    states = [m["state"] for m in store.list_messages("s", include_pending=True)]
    assert states == ["committed", "cancelled", "cancelled"]


def _plant_claim(path: Path, *, hostname: str, pid: int, expires_in: float, started: str) -> None:
    """Write a claim row as another runtime would have (another machine, or an old pid)."""
    conn = sqlite3.connect(path, isolation_level=None)
    now = time.time()
    conn.execute(
        "INSERT OR REPLACE INTO session_claims (session_id, token, owner, pid, pid_started,"
        " hostname, claimed_at, expires_at) VALUES ('s', 'planted', 'planted runtime',"
        " ?, ?, ?, ?, ?)",
        (pid, started, hostname, now, now + expires_in),
    )
    conn.close()


def test_a_claim_from_another_machine_is_only_taken_after_its_lease(
    store: SQLiteSessionStore,
) -> None:
    _plant_claim(store.path, hostname="elsewhere", pid=2**22 + 1, expires_in=0.4, started="1")
    with pytest.raises(SessionBusy, match="on elsewhere"):
        store.claim_session("s", "here")
    store.claim_session("s", "here", wait_seconds=5)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_reused_pid_does_not_keep_a_dead_runtimes_claim(store: SQLiteSessionStore) -> None:
    # Our own pid is alive, but it is not the process that made this claim.
    _plant_claim(
        store.path, hostname=socket.gethostname(), pid=os.getpid(), expires_in=30, started="1"
    )
    store.claim_session("s", "here")


def test_a_claim_from_this_process_in_another_store_is_busy(store: SQLiteSessionStore) -> None:
    with SQLiteSessionStore(store.path) as other:
        other.claim_session("s", "other runtime in this process")
        with pytest.raises(SessionBusy, match="other runtime in this process"):
            store.claim_session("s", "this runtime")
