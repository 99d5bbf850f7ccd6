"""The simulator reads the runtime's note of recovered calls (DESIGN.md §9.4): a result
or an ``unknown`` call is not repeated, a ``not_executed`` one is still to do."""

from __future__ import annotations

import httpx
import pytest

from agent_lab.application._modes import DIRECT_MODE, DUAL_MODE
from agent_lab.application._recovery import RecoveredCall, RecoveredStatus, Recovery
from agent_lab.infrastructure.simulator.request import ChatRequest
from tests.simulated.test_conversation import ASK, CALENDAR_RESULT
from tests.simulated.test_simulated_provider import dual_body, event_names, stream, tool

VOLUME = "device.volume.adjust"
CALENDAR = "calendar.schedule.create"


def _recovery(volume_status: RecoveredStatus) -> Recovery:
    calls = (
        RecoveredCall("b", 1, 1, "c1", VOLUME, {"level": 30}, volume_status, "s:turn-1:round-1:c1"),
        RecoveredCall("b", 1, 1, "c2", CALENDAR, {}, "succeeded", result=CALENDAR_RESULT),
    )
    return Recovery(calls, ("b",))


def _tools_body(note: str) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": ASK},
            {"role": "user", "content": ASK},
            {"role": "system", "content": note},
        ],
        "tools": [
            tool("device__volume__adjust", VOLUME),
            tool("calendar__schedule__create", CALENDAR),
        ],
    }


@pytest.mark.asyncio
async def test_tools_mode_reads_the_system_note_and_repeats_nothing_recorded(
    http: httpx.AsyncClient,
) -> None:
    note = DIRECT_MODE.recovery_note(_recovery("unknown"))
    result = await stream(http, _tools_body(note.content))

    assert result.tool_calls == []
    assert "couldn't confirm whether the volume change went through" in result.content
    assert "Lunch with Sam is on your calendar" in result.content


@pytest.mark.asyncio
async def test_a_call_that_never_ran_is_done_when_asked_again(http: httpx.AsyncClient) -> None:
    note = DIRECT_MODE.recovery_note(_recovery("not_executed"))
    result = await stream(http, _tools_body(note.content))

    assert [call["name"] for call in result.tool_calls] == ["device__volume__adjust"]
    assert "30" in result.tool_calls[0]["arguments"]


@pytest.mark.asyncio
async def test_dual_mode_reads_the_recovered_results_message(http: httpx.AsyncClient) -> None:
    note = DUAL_MODE.recovery_note(_recovery("not_executed"))
    body = dual_body(ASK)
    body["messages"] += [
        {"role": "user", "content": ASK},
        {"role": "user", "name": note.name, "content": note.content},
    ]
    result = await stream(http, body)

    assert event_names(result.content) == [VOLUME]


def test_a_results_note_folded_into_the_users_message_is_read_as_results() -> None:
    """The client sends user messages in a row as one (roles alternate on the wire):
    the simulator reads the ``EventAgent results:`` part as the results it was, so a
    recovered call counts as done and the user's text as the user's."""
    results = 'EventAgent results:\n{"tool": "handoff_note", "recovered": true}'
    body = {
        "messages": [
            {"role": "user", "content": f"Please note the cheese\n\nis ready\n\n{results}"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": f"{results}\n\nAnd now?"},
        ]
    }

    messages = ChatRequest.model_validate(body).messages

    assert [(m.role, m.is_results, m.text) for m in messages] == [
        ("user", False, "Please note the cheese\n\nis ready"),
        ("user", True, results),
        ("assistant", False, "Noted."),
        ("user", True, results),
        ("user", False, "And now?"),
    ]
