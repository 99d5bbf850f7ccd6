"""``@lab_flags``: shared flags declared once, laid out per command, read into ``LabOptions``."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer

from agent_lab.interfaces.cli.chat import chat
from agent_lab.interfaces.cli.flags import FLAGS, STORE_FLAGS, TURN_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import ModeChoice, ToolOption
from tests.cli.cli_helpers import Invoke

NameOption = Annotated[str, typer.Option("--name", help="A name.")]


def test_the_signature_typer_reads_follows_the_layout() -> None:
    @lab_flags("name", *STORE_FLAGS, "local")
    def command(options: LabOptions, name: NameOption = "x") -> None:
        del options, name

    parameters = inspect.signature(command).parameters

    assert list(parameters) == ["name", "db", "home", "local"]
    assert parameters["name"].annotation is NameOption
    assert parameters["home"].annotation is FLAGS["home"].option
    assert parameters["local"].default is False


def test_the_command_gets_one_lab_options_with_its_flags_converted() -> None:
    seen: list[tuple[LabOptions, str]] = []

    @lab_flags(*TURN_FLAGS, "name", "db", offline=True)
    def command(options: LabOptions, name: NameOption = "x") -> None:
        seen.append((options, name))

    values: dict[str, Any] = dict.fromkeys(TURN_FLAGS)
    values.update(mode=ModeChoice.chat_agent_tools, tool=["handoff_note"], system=None, model="m")
    command(**values, name="given", db=Path("lab.db"))

    assert seen == [
        (
            LabOptions(
                mode="chat_agent_tools",
                model="m",
                tools=("handoff_note",),
                system=(),
                db=Path("lab.db"),
                offline=True,
            ),
            "given",
        )
    ]


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        (("name", "nonesuch"), "unknown ['nonesuch']"),
        ((), "misses ['name']"),
        (("name", "db", "db"), "repeats ['db']"),
    ],
)
def test_a_layout_that_does_not_fit_the_command_is_refused(
    layout: tuple[str, ...], problem: str
) -> None:
    def command(options: LabOptions, name: NameOption = "x") -> None:
        del options, name

    with pytest.raises(TypeError, match=problem.replace("[", r"\[")):
        lab_flags(*layout)(command)


def test_a_command_may_not_declare_a_shared_flag_itself() -> None:
    def command(options: LabOptions, tool: ToolOption = None) -> None:
        del options, tool

    with pytest.raises(TypeError, match=r"repeats \['tool'\]"):
        lab_flags("tool")(command)


def test_help_lists_the_shared_flags_among_the_commands_own(cli: Invoke) -> None:
    result = cli("chat", "--help")
    listed = list(inspect.signature(chat).parameters)
    flags = ["--" + name.replace("_", "-") for name in listed]

    assert result.exit_code == 0
    panel = result.stdout[result.stdout.index("Options") :]
    positions = [panel.index(f" {flag} ") for flag in flags]
    assert positions == sorted(positions)
    assert listed[: len(TURN_FLAGS) + 2] == [*TURN_FLAGS, "config", "session"]
