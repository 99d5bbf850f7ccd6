"""``agent-lab chat`` whose store file is replaced under it (``mv other.db store.db``):
the next turn is refused with one ``error:`` line naming where the chat's sessions were
saved, the chat ends, and the file moved in is left as it was."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import process_env


def _titles(path: Path) -> list[str]:
    with SQLiteSessionStore(path, read_only=True) as store:
        return sorted(session["title"] for session in store.list_sessions())


def _read_until(stream: object, marker: str) -> str:
    seen = ""
    assert hasattr(stream, "readline")
    while marker not in seen:
        line = stream.readline()
        assert line, f"the chat ended before {marker!r}: {seen}"
        seen += line
    return seen


def test_a_chat_whose_store_file_was_replaced_ends_naming_the_saved_copy(
    tmp_path: Path,
) -> None:
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
    assert chat.stdin is not None and chat.stderr is not None
    try:
        chat.stdin.write("first question\n")
        chat.stdin.flush()
        _read_until(chat.stdout, "✓ turn 1")
        other.replace(path)
        chat.stdin.write("second question\n")
        chat.stdin.flush()
        code = chat.wait(timeout=60)  # stdin stays open: the chat ends by itself
        errors = chat.stderr.read().splitlines()
    finally:
        chat.kill()
        chat.wait()

    assert code == 1
    assert len(errors) == 1 and errors[0].startswith("error: "), errors
    assert f"{path} was replaced by another file" in errors[0]
    found = re.search(r"--db (\S+)\)", errors[0])
    assert found is not None, errors[0]
    copy = Path(found.group(1))
    assert _titles(copy) == ["first question"]
    assert _titles(path) == ["moved in"]
