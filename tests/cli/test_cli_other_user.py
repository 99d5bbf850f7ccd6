"""What another user (``nobody``) is told about files and folders it may not read or
write: the file named, the cause said, a usage error, never an internal error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import process_env

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder of root's that ``nobody`` may enter (tmp_path is root's only)."""
    path = Path(tempfile.mkdtemp(prefix="agent-lab-other-user-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _as_nobody(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    return subprocess.run(
        [*command, sys.executable, "-m", "agent_lab.interfaces.cli", *args],
        capture_output=True,
        text=True,
        env=process_env(home, **env),
        cwd="/",
        timeout=120,
    )


def test_an_unreadable_config_folder_is_a_usage_error_naming_the_file(shared: Path) -> None:
    private = shared / "private"
    (private / "agent-lab").mkdir(parents=True)
    private.chmod(0o700)  # root's: nobody may not look inside
    home = shared / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)

    ran = _as_nobody(home, "sessions", "list", XDG_CONFIG_HOME=str(private))

    assert ran.returncode == 2, ran.stderr
    assert "internal error" not in ran.stderr
    assert str(private / "agent-lab" / "config.toml") in ran.stderr
    assert "permission denied" in ran.stderr


def test_sessions_list_with_no_store_in_an_unwritable_folder_says_so(shared: Path) -> None:
    home = shared / "rootdir"
    home.mkdir()
    home.chmod(0o755)  # root's: nobody may not create the store there

    ran = _as_nobody(home, "sessions", "list")

    assert ran.returncode == 2, ran.stderr
    assert "there is no session store" in ran.stderr
    assert "Keep a copy of that file" not in ran.stderr
    assert "may not create the store there" in ran.stderr


def test_writing_to_another_users_store_says_whose_it_is_and_creates_nothing(
    shared: Path,
) -> None:
    home = shared / "lab"
    home.mkdir()
    home.chmod(0o777)  # nobody may create files here, but not write root's store
    path = home / "agent-lab.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("root's session", {}, session_id="s")
    path.chmod(0o644)
    before = path.read_bytes()

    ran = _as_nobody(home, "run", "hello")

    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.count("error:") == 1
    assert f"cannot open {path}: permission denied" in ran.stderr
    assert "this user (nobody) may not write it: it belongs to root (-rw-r--r--)" in ran.stderr
    # no -wal or -shm of nobody's left next to root's store (root's lab may need them)
    assert sorted(entry.name for entry in home.iterdir()) == ["agent-lab.sqlite3"]
    assert path.read_bytes() == before
    listed = _as_nobody(home, "sessions", "list")
    assert listed.returncode == 0 and "root's session" in listed.stdout
