"""The built-in tools' home follows an explicit setting; default registries are cheap.

Registries built for every session share the built-in definitions, whose schemas are
checked against the meta-schema once (the speed itself is measured in bench/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import platformdirs
import pytest
from jsonschema import Draft202012Validator

from agent_lab.application.builtin_tools import builtin_tool_definitions
from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry, build_default_tool_registry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.tool_backends.backends import TOOLS_DATABASE_NAME
from agent_lab.testing import ScriptedChatClient, text, tool_call


@pytest.fixture
def platform_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No AGENT_LAB_HOME; the platform's user data directory points into tmp_path."""
    monkeypatch.delenv("AGENT_LAB_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return Path(platformdirs.user_data_dir("agent-lab"))


@pytest.mark.asyncio
async def test_an_explicit_home_receives_the_tools_state(
    tmp_path: Path, platform_home: Path
) -> None:
    home = tmp_path / "explicit-home"
    client = ScriptedChatClient(
        [[tool_call("c-1", "handoff_note", message="call back")], text("Noted.")]
    )
    runtime = DebugRuntime(client, registry=build_default_tool_registry(home=home))
    request = DebugRunRequest(
        user_message="leave a note",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["handoff_note"]),
        tool_invocation_mode="chat_agent_tools",
    )

    outputs = [m async for m in runtime.run(request)]

    assert outputs[-1] == {"type": "done"}
    assert (home / TOOLS_DATABASE_NAME).is_file()
    assert not (platform_home / TOOLS_DATABASE_NAME).exists()


@pytest.mark.asyncio
async def test_without_any_setting_state_goes_to_the_platform_data_dir(
    platform_home: Path,
) -> None:
    registry = build_default_tool_registry()
    event = ToolCallEvent(
        id="c", name="device.volume.adjust", arguments={"mode": "absolute", "value": 7}
    )

    outcome = await registry.run(event)

    assert outcome.ok, outcome.payload
    assert (platform_home / TOOLS_DATABASE_NAME).is_file()


@pytest.mark.asyncio
async def test_agent_lab_home_is_used_when_no_home_is_passed(
    tmp_path: Path, platform_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_LAB_HOME", str(tmp_path / "env-home"))
    registry = build_default_tool_registry()

    await registry.run(ToolCallEvent(id="c", name="handoff_note", arguments={"message": "x"}))

    assert (tmp_path / "env-home" / TOOLS_DATABASE_NAME).is_file()
    assert not (platform_home / TOOLS_DATABASE_NAME).exists()


def test_default_registries_share_definitions_and_check_schemas_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_LAB_HOME", str(tmp_path / "shared-home"))
    checks: list[Any] = []
    original = Draft202012Validator.check_schema

    def counting(schema: Any, *args: Any, **kwargs: Any) -> None:
        checks.append(schema)
        original(schema, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "check_schema", counting)
    first = build_default_tool_registry()
    for _ in range(50):
        DebugRuntime(ScriptedChatClient([]))
    last = build_default_tool_registry()

    assert len(checks) <= len(first.names())
    assert [d is e for d, e in zip(first.definitions(), last.definitions(), strict=True)] == [
        True
    ] * 5
    assert first is not last  # registries stay separate: register() on one is local
    last.register(
        ToolDefinition(name="extra", description="x", parameters={"type": "object"}, handler=print)
    )
    assert "extra" not in first and "extra" not in build_default_tool_registry()


def test_explicit_backends_yield_the_same_definitions_every_time(tmp_path: Path) -> None:
    from agent_lab.infrastructure.tool_backends.backends import local_backends

    backends = local_backends(tmp_path)

    first, second = builtin_tool_definitions(backends), builtin_tool_definitions(backends)

    assert all(a is b for a, b in zip(first, second, strict=True))
    assert ToolRegistry(first).names() == ToolRegistry(second).names()
