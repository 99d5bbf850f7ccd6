"""An answer the provider cut off (``finish_reason`` ``length`` or ``content_filter``)
says so in ``agent-lab chat`` as it ends, and in ``sessions show`` when reopened."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke

_WHY = {
    "length": "✂ answer cut off: the model reached its max_tokens limit (finish_reason length)",
    "content_filter": (
        "✂ answer cut off: the provider's content filter stopped it (finish_reason content_filter)"
    ),
}


def _stopped(text: str, reason: str) -> ScriptedResponse:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return ScriptedResponse.sse(chunk({"content": text}), chunk({}, reason))


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_chat_and_show_say_the_answer_was_cut_off_and_why(cli: Invoke, reason: str) -> None:
    with SSETranscriptServer(_stopped("The first step is to", reason)) as server:
        chatted = cli("chat", "--base-url", server.base_url, "--model", "m-1", input="How?\n")
    assert chatted.exit_code == 0, chatted.stderr
    assert "The first step is to" in chatted.stdout
    assert _WHY[reason] in chatted.stdout

    listed = cli("sessions", "list", "--json")
    session_id = json.loads(listed.stdout)[0]["id"]
    shown = cli("sessions", "show", session_id)
    assert shown.exit_code == 0, shown.stderr
    assert _WHY[reason] in shown.stdout
    call_line = next(line for line in shown.stdout.splitlines() if "chat call chat:1:1" in line)
    assert f"· cut off ({reason}) ·" in call_line


def test_a_finished_answer_says_nothing_of_a_cut(cli: Invoke) -> None:
    with SSETranscriptServer(_stopped("All done.", "stop")) as server:
        chatted = cli("chat", "--base-url", server.base_url, "--model", "m-1", input="Go\n")
    assert chatted.exit_code == 0, chatted.stderr
    assert "cut off" not in chatted.stdout
