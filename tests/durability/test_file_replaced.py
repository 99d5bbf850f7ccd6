"""Deleting or replacing the store file mid-session: later turns fail loudly, none is
reported done, and what the store held is saved to a copy it names."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import PersistenceFailed
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text
from tests.store.store_support import user


async def _until_turn_ends(queues: Any) -> dict[str, Any]:
    while True:
        output = await asyncio.wait_for(queues.output.get(), timeout=30)
        if output["type"] in {"turn_completed", "error"}:
            return dict(output)


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.asyncio
async def test_a_turn_after_the_file_was_deleted_fails_as_file_replaced(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite3"
    store = SQLiteSessionStore(path)
    client = ScriptedChatClient([text("first answer"), text("second answer")])
    runtime = DebugRuntime(client, session_store=store)
    request = DebugRunRequest(
        session_id="deleted",
        user_message="first",
        chat_agent=AgentParams(model="m"),
        tool_invocation_mode="dual_agent",
    )
    queues = runtime.start_session(request)
    assert (await _until_turn_ends(queues))["type"] == "turn_completed"
    await asyncio.to_thread(_delete, path)

    await queues.input.put(ChatMessage(role="user", content="second"))
    ended = await _until_turn_ends(queues)
    await runtime.aclose()
    store.close()

    assert ended["type"] == "error"
    assert ended["failure_reason"] == "session_persistence_failed:file_replaced"
    assert not path.exists()  # nothing pretended to write a new file at the path


def _titles(path: Path) -> list[str]:
    """The session titles a fresh store at ``path`` lists (as the next program sees it)."""
    with SQLiteSessionStore(path) as fresh:
        return sorted(session["title"] for session in fresh.list_sessions())


@pytest.fixture
def old_and_new(tmp_path: Path) -> tuple[SQLiteSessionStore, Path]:
    """A store open on ``lab.sqlite3`` with a session of two turns, and a file with
    another session moved over its path (``mv other lab.sqlite3``) while it is open."""
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    store.create_session("kept", {}, session_id="old")
    for turn in (1, 2):
        store.start_turn("old", turn, f"turn {turn}", messages=[user(f"turn {turn}")])
        store.complete_turn("old", turn, status="completed")
    other = tmp_path / "other.sqlite3"
    with SQLiteSessionStore(other) as new:
        new.create_session("moved in", {}, session_id="new")
    other.replace(store.path)
    return store, store.path


def test_a_write_after_the_file_was_replaced_saves_a_copy_and_names_it(
    old_and_new: tuple[SQLiteSessionStore, Path],
) -> None:
    store, path = old_and_new
    with pytest.raises(PersistenceFailed) as caught:
        store.start_turn("old", 3, "turn 3", messages=[user("turn 3")])
    with pytest.raises(PersistenceFailed, match="replaced"):
        store.create_session("later", {}, session_id="later")
    store.close()

    # the old file's log is kept off the new file: it reads as it was moved in
    assert _titles(path) == ["moved in"]
    assert caught.value.reason == "file_replaced"
    copy = store.replaced.copy if store.replaced is not None else None
    assert copy is not None and copy.parent == path.parent and copy != path
    assert f"is in {copy}" in str(caught.value) and f"--db {copy}" in str(caught.value)
    assert _titles(copy) == ["kept"]
    with SQLiteSessionStore(copy) as saved:
        assert [turn["status"] for turn in saved.list_turns("old")] == ["completed"] * 2


def test_closing_a_store_whose_file_was_replaced_saves_a_copy(
    old_and_new: tuple[SQLiteSessionStore, Path],
) -> None:
    store, path = old_and_new
    store.close()

    assert _titles(path) == ["moved in"]  # not the old file's log applied to the new one
    assert store.replaced is not None and store.replaced.copy is not None
    assert not store.replaced.deleted
    assert _titles(store.replaced.copy) == ["kept"]


def test_a_deleted_file_is_saved_to_a_copy_and_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("only here", {}, session_id="s")
        _delete(path)
        with pytest.raises(PersistenceFailed, match="was deleted after this store opened it"):
            store.create_session("lost", {}, session_id="t")

    assert store.replaced is not None and store.replaced.copy is not None
    assert _titles(store.replaced.copy) == ["only here"]
    assert not path.exists()
