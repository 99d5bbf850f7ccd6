"""``run --session ID`` (and ``chat --session ID``) without ``--mode`` goes on in the mode
the session last ran in, read from its stored turns, and says so."""

from __future__ import annotations

import json
from collections.abc import Callable

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke


def _modes_by_turn(store: SQLiteSessionStore, session_id: str) -> dict[int, str]:
    calls = store.usage_summary(session_id)["calls"]
    return {int(call["turn_index"]): str(call["mode"]) for call in calls}


def _started(cli_process: Invoke, mode: str) -> str:
    first = cli_process("run", "Hi", "--json", "--mode", mode)
    assert first.exit_code == 0, first.stderr
    return str(json.loads(first.stdout.splitlines()[0])["session_id"])


def test_run_continues_in_the_mode_of_the_last_turn_and_says_which(
    cli_process: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    session_id = _started(cli_process, "chat_agent_tools")
    switched = cli_process("run", "Hello again", "--session", session_id, "--mode", "dual_agent")
    assert switched.exit_code == 0, switched.stderr
    assert "continuing session" not in switched.stdout  # --mode said it

    went_on = cli_process("run", "And once more", "--session", session_id[:8])

    assert went_on.exit_code == 0, went_on.stderr
    assert (
        f"continuing session {session_id} in dual_agent mode, the mode its last turn "
        "(turn 2) ran in" in went_on.stdout
    )
    assert _modes_by_turn(store(), session_id) == {
        1: "chat_agent_tools",
        2: "dual_agent",
        3: "dual_agent",
    }


def test_a_last_turn_that_made_no_model_call_still_gives_its_mode(
    cli_process: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    session_id = _started(cli_process, "dual_agent")
    failed = cli_process(
        "run",
        "Nobody answers",
        "--session",
        session_id,
        "--mode",
        "chat_agent_tools",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    )
    assert failed.exit_code == 2, failed.stderr

    chatted = cli_process("chat", "--session", session_id, input="Are you there?\n")

    assert chatted.exit_code == 0, chatted.stderr
    assert "in chat_agent_tools mode, the mode its last turn (turn 2) ran in" in chatted.stdout
    assert _modes_by_turn(store(), session_id)[3] == "chat_agent_tools"
