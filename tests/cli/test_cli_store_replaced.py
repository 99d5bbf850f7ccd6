"""``agent-lab chat`` whose store file is replaced under it (``mv other.db store.db``):
one ``error:`` line names where the chat's sessions were saved, whether a later turn or
the end of the chat found it; the chat ends; the file moved in is left as it was."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import process_env, wait_for_lab_url


def _titles(path: Path) -> list[str]:
    with SQLiteSessionStore(path, read_only=True) as store:
        return sorted(session["title"] for session in store.list_sessions())


@pytest.fixture
def chat_then_replaced(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A chat on ``store.db`` that completed one turn, after which another store file
    was moved over ``store.db``."""
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "store.db"
    other = tmp_path / "other.db"
    with SQLiteSessionStore(other) as moved_in:
        moved_in.create_session("moved in", {}, session_id="other")
    chat = subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "chat", "--db", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    assert chat.stdin is not None and chat.stdout is not None
    try:
        chat.stdin.write("first question\n")
        chat.stdin.flush()
        seen = ""
        while "✓ turn 1" not in seen:
            line = chat.stdout.readline()
            assert line, f"the chat ended before its first turn did: {seen}"
            seen += line
        other.replace(path)
        yield chat, path
    finally:
        chat.kill()
        chat.wait()


def _the_copy(errors: list[str], path: Path) -> Path:
    assert len(errors) == 1 and errors[0].startswith("error: "), errors
    assert f"{path} was replaced by another file" in errors[0]
    found = re.search(r"--db (\S+)\)", errors[0])
    assert found is not None, errors[0]
    return Path(found.group(1))


def test_the_next_turn_is_refused_naming_the_copy_and_the_chat_ends(
    chat_then_replaced: tuple[subprocess.Popen[str], Path],
) -> None:
    chat, path = chat_then_replaced
    assert chat.stdin is not None and chat.stderr is not None
    chat.stdin.write("second question\n")
    chat.stdin.flush()
    code = chat.wait(timeout=60)  # stdin stays open: the chat ends by itself
    copy = _the_copy(chat.stderr.read().splitlines(), path)

    assert code == 1
    assert _titles(copy) == ["first question"]
    assert _titles(path) == ["moved in"]


def test_a_chat_that_ends_after_the_file_was_replaced_says_where_its_turns_went(
    chat_then_replaced: tuple[subprocess.Popen[str], Path],
) -> None:
    chat, path = chat_then_replaced
    assert chat.stdin is not None and chat.stderr is not None
    chat.stdin.close()  # end of input: no further turn finds it
    code = chat.wait(timeout=60)
    copy = _the_copy(chat.stderr.read().splitlines(), path)

    assert code == 1
    assert _titles(copy) == ["first question"]
    assert _titles(path) == ["moved in"]


def _until_answering(url: str) -> None:
    for _ in range(600):
        try:
            httpx.get(f"{url}/api/health", timeout=5)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"the web lab at {url} never answered")


def test_serve_whose_store_file_was_replaced_says_where_its_sessions_went(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path, other = tmp_path / "store.db", tmp_path / "other.db"
    for target, title in ((path, "served"), (other, "moved in")):
        with SQLiteSessionStore(target) as made:
            made.create_session(title, {}, session_id=title.replace(" ", "-"))
    command = [sys.executable, "-m", "agent_lab.interfaces.cli", "serve", "--db", str(path)]
    serve = subprocess.Popen(
        [*command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    try:
        url = wait_for_lab_url(serve)
        _until_answering(url)  # started: SIGINT now stops the server, not its start
        other.replace(path)
        serve.send_signal(signal.SIGINT)  # the usual stop: its exit code stays 0
        serve.wait(timeout=60)
        assert serve.stderr is not None
        copy = _the_copy(serve.stderr.read().splitlines(), path)
    finally:
        serve.kill()
        serve.wait()

    assert _titles(copy) == ["served"]
    assert _titles(path) == ["moved in"]
