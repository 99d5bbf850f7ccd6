"""Every audit is logged at INFO with its event, session and turn (and nothing is built
for a log record when INFO is off)."""

from __future__ import annotations

import logging

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.testing import ScriptedChatClient, text


@pytest.mark.asyncio
async def test_each_audit_is_logged_with_its_event_and_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = DebugRuntime(ScriptedChatClient([text("Hi.")]), registry=ToolRegistry())
    request = DebugRunRequest(user_message="Hello", chat_agent=AgentParams(model="m"))
    with caplog.at_level(logging.INFO, logger="agent_lab.application.runtime"):
        outputs = [message async for message in runtime.run(request)]

    audited = [m["event"] for m in outputs if m["type"] == "audit"]
    logged = [r for r in caplog.records if hasattr(r, "audit_event")]
    events = [getattr(r, "audit_event") for r in logged]  # noqa: B009 (set via ``extra``)
    assert events == audited
    responses = [r for r in logged if r.getMessage() == "chat_agent_response"]
    assert [getattr(r, "turn_index") for r in responses] == [1]  # noqa: B009
    assert [r.getMessage() for r in logged] == events


@pytest.mark.asyncio
async def test_audits_are_not_logged_when_info_is_off(caplog: pytest.LogCaptureFixture) -> None:
    runtime = DebugRuntime(ScriptedChatClient([text("Hi.")]), registry=ToolRegistry())
    request = DebugRunRequest(user_message="Hello", chat_agent=AgentParams(model="m"))
    with caplog.at_level(logging.WARNING, logger="agent_lab.application.runtime"):
        outputs = [message async for message in runtime.run(request)]

    assert any(m["type"] == "audit" for m in outputs)
    assert not [r for r in caplog.records if hasattr(r, "audit_event")]
