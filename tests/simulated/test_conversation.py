"""What the simulator reads back from a conversation: actions done, results, zones."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from agent_lab.domain.events import EVENT_BLOCK_START
from agent_lab.infrastructure.simulator.clock import extract_timezone
from agent_lab.infrastructure.simulator.intents import IntentKind, detect_intents
from tests.simulated.test_simulated_provider import (
    SEARCH_PAYLOAD,
    dual_body,
    event_names,
    stream,
    tool,
)

ASK = "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time"
VOLUME_RESULT = {"tool": "device.volume.adjust", "previous": 50, "volume": 30}
CALENDAR_RESULT = {
    "tool": "calendar.schedule.create",
    "status": "scheduled",
    "title": "Lunch with Sam",
    "start_at": "2026-07-14T12:00:00+02:00",
    "timezone": "Europe/Berlin",
}
CONFIRMATION = "Scheduled Lunch with Sam for 2026-07-14T12:00:00+02:00 (Europe/Berlin)."


def _tools_turn(*results: dict[str, Any], after: list[dict[str, Any]]) -> dict[str, Any]:
    names = ["device__volume__adjust", "calendar__schedule__create"]
    calls: list[dict[str, Any]] = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for i, name in enumerate(names[: len(results)])
    ]
    replies = [
        {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"]}
        | {"content": json.dumps(result)}
        for call, result in zip(calls, results, strict=True)
    ]
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": "On it.", "tool_calls": calls},
            *replies,
            *after,
        ],
        "tools": [
            tool("device__volume__adjust", "device.volume.adjust"),
            tool("calendar__schedule__create", "calendar.schedule.create"),
        ],
    }


@pytest.mark.asyncio
async def test_tools_mode_does_not_repeat_calls_after_a_confirmation(
    http: httpx.AsyncClient,
) -> None:
    body = _tools_turn(
        VOLUME_RESULT,
        CALENDAR_RESULT,
        after=[{"role": "assistant", "content": CONFIRMATION}],
    )
    result = await stream(http, body)

    assert result.tool_calls == [] and result.finish_reason == "stop"
    assert result.content == "Volume set to 30."


@pytest.mark.asyncio
async def test_tools_mode_acts_only_on_what_is_still_pending(http: httpx.AsyncClient) -> None:
    body = _tools_turn(VOLUME_RESULT, after=[])
    result = await stream(http, body)

    assert [call["name"] for call in result.tool_calls] == ["calendar__schedule__create"]
    assert json.loads(result.tool_calls[0]["arguments"])["timezone"] == "Europe/Berlin"
    assert result.content.startswith("Volume set to 30.")


@pytest.mark.asyncio
async def test_dual_mode_sums_up_instead_of_writing_the_block_again(
    http: httpx.AsyncClient,
) -> None:
    results = "EventAgent results:\n" + "\n".join(
        json.dumps(payload) for payload in (VOLUME_RESULT, CALENDAR_RESULT, SEARCH_PAYLOAD)
    )
    body = dual_body(ASK + ", then look up event batch safety")
    body["messages"] += [
        {"role": "assistant", "content": "On it."},
        {"role": "user", "name": "event_agent", "content": results},
        {"role": "assistant", "content": CONFIRMATION},
    ]
    result = await stream(http, body)

    assert EVENT_BLOCK_START not in result.content
    assert result.content.startswith("Volume set to 30. The top result is")
    assert "Batch safety in event agents" in result.content
    assert "Lunch with Sam" not in result.content  # the confirmation already said it


@pytest.mark.asyncio
async def test_a_new_user_turn_acts_again(http: httpx.AsyncClient) -> None:
    body = dual_body("Turn it up")
    body["messages"] += [
        {"role": "assistant", "content": "Turning it up now."},
        {"role": "user", "name": "event_agent", "content": "EventAgent results:\n{}"},
        {"role": "assistant", "content": "The volume is adjusted."},
        {"role": "user", "content": "Turn it up"},
    ]
    result = await stream(http, body)

    assert event_names(result.content) == ["device.volume.adjust"]


@pytest.mark.asyncio
async def test_summary_gives_the_entry_with_its_zone_and_the_hit_count(
    http: httpx.AsyncClient,
) -> None:
    search = {**SEARCH_PAYLOAD, "results": [*SEARCH_PAYLOAD["results"], {"title": "WAL mode"}]}
    results = "EventAgent results:\n" + "\n".join(map(json.dumps, (CALENDAR_RESULT, search)))
    body = dual_body("Schedule lunch with Sam tomorrow at noon and search for batch safety")
    body["messages"] += [
        {"role": "assistant", "content": "On it."},
        {"role": "user", "name": "event_agent", "content": results},
    ]
    result = await stream(http, body)

    assert result.content.startswith(
        "Lunch with Sam is on your calendar for 2026-07-14T12:00:00+02:00 (Europe/Berlin). "
        'I found 2 results; the top one is "Batch safety in event agents"'
    )


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("lunch tomorrow at noon Berlin time", "Europe/Berlin"),
        ("a call at 9 New York time", "America/New_York"),
        ("dinner at 7pm in Tokyo", "Asia/Tokyo"),
        ("stand-up at 10 Pacific time", "America/Los_Angeles"),
        ("Team Berlin time sync", "Europe/Berlin"),
        ("a review in Europe/Lisbon, not Berlin time", "Europe/Lisbon"),
        ("lunch with Casey in the park", "UTC"),
        ("lunch with Regina at noon", "UTC"),
    ],
)
def test_timezone_from_a_place_name(text: str, zone: str) -> None:
    assert extract_timezone(text) == zone


def test_schedule_intent_uses_the_place_zone(clock: Callable[[], datetime]) -> None:
    [intent] = detect_intents("Schedule lunch with Sam tomorrow at noon Berlin time", clock())
    assert intent.kind is IntentKind.SCHEDULE
    assert intent.arguments == {
        "title": "Lunch with Sam",
        "start_at": "2026-07-14T12:00:00+02:00",
        "timezone": "Europe/Berlin",
    }


@pytest.mark.asyncio
async def test_a_result_without_a_tool_name_still_counts_as_done(
    http: httpx.AsyncClient,
) -> None:
    body = dual_body("Search for event batch safety")
    body["messages"] += [
        {"role": "assistant", "content": "Let me look that up."},
        {"role": "user", "name": "event_agent", "content": 'EventAgent results:\n{"hits": 0}'},
    ]
    result = await stream(http, body)

    assert EVENT_BLOCK_START not in result.content
    assert result.content == "That's done."


@pytest.mark.asyncio
async def test_an_uncertain_outcome_is_not_repeated_and_is_worded_as_uncertain(
    http: httpx.AsyncClient,
) -> None:
    uncertain = {"tool": "calendar.schedule.create", "status": "unknown"}
    body = dual_body("Schedule lunch with Sam tomorrow at noon and turn it up")
    body["messages"] += [
        {"role": "assistant", "content": "On it."},
        {
            "role": "user",
            "name": "event_agent",
            "content": "EventAgent results:\n"
            + "\n".join(map(json.dumps, (uncertain, {"hits": 3, "volume": 60}))),
        },
    ]
    result = await stream(http, body)

    assert EVENT_BLOCK_START not in result.content
    assert result.content == (
        "I couldn't confirm whether the calendar entry went through; please check before I "
        "retry. Volume set to 60."
    )


@pytest.mark.parametrize(
    ("message", "query"),
    [
        ("Search the local corpus for SQLite WAL.", "SQLite WAL"),
        ("search the web for salt and pepper", "salt and pepper"),
        ("Search my notes for Dana", "Dana"),
        ("Search for event batch safety", "event batch safety"),
    ],
)
def test_search_query_leaves_out_where_to_search(
    message: str, query: str, clock: Callable[[], datetime]
) -> None:
    [intent] = detect_intents(message, clock())
    assert intent.arguments == {"query": query}


@pytest.mark.parametrize(
    "message",
    [
        "What did I schedule?",
        "what did we book a room for",
        "Did I schedule a design review tomorrow?",
        "Have you set up a call with Dana?",
        "When did I arrange the offsite?",
        "What did I search for?",
        "Did you turn the volume up?",
    ],
)
def test_a_question_about_what_was_done_asks_for_no_action(
    message: str, clock: Callable[[], datetime]
) -> None:
    assert detect_intents(message, clock()) == []


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("Can you schedule a design review at 9?", "Design review"),
        ("Could you book a table for tonight?", "Table"),
        ("What did I schedule? Also schedule a sync at 4pm", "Sync"),
        ("Please schedule.", "Meeting"),
        ("Schedule", "Meeting"),
        ("schedule it tomorrow", "Meeting"),
    ],
)
def test_a_request_still_schedules_and_a_vague_title_is_meeting(
    message: str, title: str, clock: Callable[[], datetime]
) -> None:
    [intent] = detect_intents(message, clock())
    assert intent.kind is IntentKind.SCHEDULE
    assert intent.arguments["title"] == title


@pytest.mark.asyncio
async def test_what_did_i_schedule_gets_an_answer_not_a_booking(http: httpx.AsyncClient) -> None:
    dual = await stream(http, dual_body("What did I schedule?"))
    assert EVENT_BLOCK_START not in dual.content
    assert dual.content and dual.finish_reason == "stop"

    offered = [tool("calendar__schedule__create", "calendar.schedule.create")]
    tools = await stream(
        http,
        {
            "model": "m",
            "messages": [{"role": "user", "content": "What did I schedule?"}],
            "tools": offered,
        },
    )
    assert tools.tool_calls == [] and tools.finish_reason == "stop"
