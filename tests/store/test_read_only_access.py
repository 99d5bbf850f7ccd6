"""Reading a store this user may not write: an unwritable file, an unwritable directory.

The directory is made unwritable for real: ``chmod 0555`` for ordinary users, and
``chattr +i`` (immutable) for root, whom permission bits do not stop but the kernel's
immutable flag does. Every case checks that the file's bytes are unchanged and that
nothing new appeared next to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_lab.domain.errors import PersistenceFailed, StoreFormatError
from agent_lab.infrastructure.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.store.store_support import unwritable, user


def _made_store(path: Path) -> None:
    with SQLiteSessionStore(path) as store:
        store.create_session("t", {}, session_id="s")
        store.append_message("s", 1, user("before"))


def _digest(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _listing(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir())


def _assert_reads_and_refuses_writes(path: Path, contents: list[str]) -> None:
    with SQLiteSessionStore(path, read_only=True) as reader:
        assert [s["id"] for s in reader.list_sessions()] == ["s"]
        assert [m["content"] for m in reader.list_messages("s")] == contents
        with pytest.raises(PersistenceFailed) as refused:
            reader.append_message("s", 2, user("nope"))
        assert refused.value.reason == "read_only"
        assert f"{path} is open for reading only; nothing was written" in str(refused.value)
        assert isinstance(refused.value.__cause__, sqlite3.Error)


def test_a_store_in_an_unwritable_directory_is_read_without_writing(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    path = folder / "agent-lab.sqlite3"
    _made_store(path)
    before, files = _digest(path), _listing(folder)
    with unwritable(folder):
        _assert_reads_and_refuses_writes(path, ["before"])
        with pytest.raises(PersistenceFailed) as writable:
            SQLiteSessionStore(path)
    assert writable.value.reason == "read_only"
    assert str(path) in str(writable.value) and "permission denied" in str(writable.value)
    assert f"may not create files in {folder}" in str(writable.value)
    assert _digest(path) == before and _listing(folder) == files


def test_an_unwritable_store_file_is_read_read_only(tmp_path: Path) -> None:
    path = tmp_path / "agent-lab.sqlite3"
    _made_store(path)
    before = _digest(path)
    with unwritable(path):
        _assert_reads_and_refuses_writes(path, ["before"])
    assert _digest(path) == before


_WRITER = """
import sys, time
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
store = SQLiteSessionStore(sys.argv[1])
store.append_message("s", 1, ChatMessage(role="user", content="after"))
print("written", flush=True)
time.sleep(60)
"""


@contextmanager
def _writer_holding(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process that committed "after" (still in the ``-wal``) and keeps the store open."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "written\n"
        yield writer
    finally:
        writer.kill()
        writer.wait()
        if writer.stdout is not None:
            writer.stdout.close()


def test_a_reader_that_may_not_write_sees_commits_still_in_the_wal(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    path = folder / "agent-lab.sqlite3"
    _made_store(path)
    with _writer_holding(path):
        assert path.with_name(path.name + "-wal").stat().st_size > 0
        with unwritable(folder):
            _assert_reads_and_refuses_writes(path, ["before", "after"])


def _crashed_writer(tmp_path: Path) -> Path:
    """A store whose writer was killed with a commit ("after") still in its ``-wal``."""
    folder = tmp_path / "home"
    folder.mkdir()
    path = folder / "agent-lab.sqlite3"
    _made_store(path)
    with _writer_holding(path) as writer:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    return path


def test_a_crashed_writers_wal_is_read_through_its_index(tmp_path: Path) -> None:
    path = _crashed_writer(tmp_path)
    before, files = _digest(path), _listing(path.parent)
    with unwritable(path.parent):
        _assert_reads_and_refuses_writes(path, ["before", "after"])
    assert _digest(path) == before and _listing(path.parent) == files


def test_a_wal_with_commits_that_cannot_be_read_is_refused_by_name(tmp_path: Path) -> None:
    path = _crashed_writer(tmp_path)
    path.with_name(path.name + "-shm").unlink()  # without its index the log is unreadable
    before, files = _digest(path), _listing(path.parent)
    with unwritable(path.parent), pytest.raises(PersistenceFailed) as refused:
        SQLiteSessionStore(path, read_only=True)
    assert refused.value.reason == "read_only"
    assert f"its write-ahead log {path.name}-wal holds commits" in str(refused.value)
    assert str(path.parent) in str(refused.value)
    assert _digest(path) == before and _listing(path.parent) == files
    with SQLiteSessionStore(path) as owner:  # with write access the commit is there
        assert [m["content"] for m in owner.list_messages("s")] == ["before", "after"]


def test_a_new_store_in_an_unwritable_directory_names_the_path_and_the_cause(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    path = folder / "agent-lab.sqlite3"
    with unwritable(folder), pytest.raises(PersistenceFailed) as raised:
        SQLiteSessionStore(path)
    assert raised.value.reason == "read_only"
    message = str(raised.value)
    assert f"cannot open {path}: permission denied" in message
    assert "unable to open database file" in message  # SQLite's words stay, after the cause
    assert _listing(folder) == []


def _older_store(path: Path, version: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for step in range(1, version + 1):
        for statement in MIGRATIONS[step]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def test_a_read_only_open_does_not_migrate_an_older_file_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    _older_store(path, SCHEMA_VERSION - 1)
    before = _digest(path)
    with pytest.raises(StoreFormatError) as raised:
        SQLiteSessionStore(path, read_only=True)
    message = str(raised.value)
    assert f"schema version {SCHEMA_VERSION - 1}, older than the version {SCHEMA_VERSION}" in (
        message
    )
    assert "open it once with write access" in message and "left unchanged" in message
    assert _digest(path) == before
    with SQLiteSessionStore(path) as upgraded:  # a writable open upgrades it
        assert upgraded.list_sessions() == []
    with SQLiteSessionStore(path, read_only=True) as reader:
        assert reader.list_sessions() == []


_READ_AS_ANOTHER_USER = """
import json, sys
from agent_lab.domain.errors import PersistenceFailed
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
path = sys.argv[1]
try:
    SQLiteSessionStore(path)
    writable = None
except PersistenceFailed as exc:
    writable = str(exc)
with SQLiteSessionStore(path, read_only=True) as reader:
    contents = [m["content"] for m in reader.list_messages("s")]
print(json.dumps({"writable": writable, "contents": contents}))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs the reader as another user, which needs root and setpriv; as an "
    "ordinary user the tests above already read a store this user may not write",
)
def test_another_user_reads_a_store_it_may_not_write() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agent-lab-ro-"))  # pytest's tmp_path is root-only
    try:
        folder.chmod(0o755)
        path = folder / "agent-lab.sqlite3"
        _made_store(path)
        path.chmod(0o444)
        before, files = _digest(path), _listing(folder)
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            + [sys.executable, "-c", _READ_AS_ANOTHER_USER, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["contents"] == ["before"]
        assert f"cannot open {path}: permission denied" in result["writable"]
        assert _digest(path) == before and _listing(folder) == files
    finally:
        shutil.rmtree(folder)


def test_a_read_only_open_of_an_empty_file_says_there_is_no_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch()
    with pytest.raises(StoreFormatError, match="there is no session store at .* is empty"):
        SQLiteSessionStore(path, read_only=True)
    assert path.read_bytes() == b""
