"""``agent-lab run`` on a store it may not write says why, for root too: an immutable
(``chattr +i``) file or folder, which even root may not write (another user's file is
``test_cli_other_user.py``, run as ``nobody``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke
from tests.store.store_support import unwritable

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="ordinary users are told about permission bits (test_cli_other_user.py)",
)


@pytest.fixture
def stored(home: Path) -> Path:
    path = home / "agent-lab.sqlite3"
    with SQLiteSessionStore(path) as store:
        store.create_session("kept", {}, session_id="s")
    return path


def test_an_immutable_store_file_is_named_as_such(cli_process: Invoke, stored: Path) -> None:
    with unwritable(stored):
        ran = cli_process("run", "hello")
        listed = cli_process("sessions", "list")

    assert ran.exit_code == 1
    assert ran.error_lines == [
        f"error: the session storage is read-only: cannot open {stored}: the "
        "file is immutable (chattr +i), so no user may write it, root included; "
        f"chattr -i {stored} lifts that (nothing was changed)"
    ]
    assert listed.exit_code == 0 and "kept" in listed.stdout


def test_an_immutable_folder_is_named_as_such(cli_process: Invoke, stored: Path) -> None:
    with unwritable(stored.parent):
        ran = cli_process("run", "hello")

    assert ran.exit_code == 1
    assert len(ran.error_lines) == 1
    assert (
        f"may not create files in {stored.parent}: the directory is immutable"
        in (ran.error_lines[0])
    )
