"""Scripted conversations for ``agent-lab demo`` and ``agent-lab compare``.

A scenario is a TOML file: user turns, optional system prompts, tools, per-mode
overrides and the simulated model's latency (the format is documented in
``docs/scenarios.md``). Bundled scenarios ship in this package and are found by name::

    scenario = load_scenario("demo")           # bundled
    scenario = load_scenario("my-scenario.toml")  # a file
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.domain.errors import ConfigError

__all__ = [
    "ALL_MODES",
    "ModeOverrides",
    "Scenario",
    "SimulatedLatency",
    "bundled_scenarios",
    "load_scenario",
    "parse_scenario",
]

ALL_MODES: tuple[ToolInvocationMode, ...] = ("dual_agent", "chat_agent_tools")


class ModeOverrides(BaseModel):
    """Settings that apply to one mode only; unset fields keep the scenario's value."""

    model_config = ConfigDict(extra="forbid")

    system_prompts: list[str] | None = None
    tools: list[str] | None = None
    max_event_loops: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)


class SimulatedLatency(BaseModel):
    """Timing of the simulated model (ignored against a real endpoint)."""

    model_config = ConfigDict(extra="forbid")

    ttft_ms: float | None = Field(default=None, ge=0)
    """Milliseconds before the first chunk; unset keeps the lab's setting."""
    tokens_per_second: float | None = Field(default=None, ge=0)
    """Pace of the following chunks; ``0`` means no pacing."""


class Scenario(BaseModel):
    """One scripted conversation, run the same way in every mode it lists."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    description: str = ""
    turns: list[str] = Field(min_length=1)
    """The user messages, in order; a table ``{user = "..."}`` is accepted too."""
    system_prompts: list[str] | None = None
    tools: list[str] | None = None
    max_event_loops: int | None = Field(default=None, ge=0)
    modes: list[ToolInvocationMode] = Field(default_factory=lambda: list(ALL_MODES), min_length=1)
    overrides: dict[ToolInvocationMode, ModeOverrides] = Field(default_factory=dict)
    simulated: SimulatedLatency = Field(default_factory=SimulatedLatency)

    @field_validator("turns", mode="before")
    @classmethod
    def _user_turns(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [item.get("user") if isinstance(item, dict) else item for item in value]

    @field_validator("turns")
    @classmethod
    def _not_blank(cls, value: list[str]) -> list[str]:
        if any(not turn.strip() for turn in value):
            raise ValueError("a user turn is empty")
        return value


def bundled_scenarios() -> list[str]:
    """Names of the scenarios shipped with Agent Lab, sorted."""
    files = resources.files(__name__).iterdir()
    return sorted(item.name[:-5] for item in files if item.name.endswith(".toml"))


def load_scenario(name_or_path: str) -> Scenario:
    """Load a scenario file, or a bundled scenario by name (``demo``).

    Raises:
        ConfigError: no such file or bundled scenario, invalid TOML, or invalid fields.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return parse_scenario(_read(path), source=str(path), default_name=path.stem)
    name = name_or_path.removesuffix(".toml")
    if name in bundled_scenarios():
        text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
        return parse_scenario(text, source=f"bundled scenario {name!r}", default_name=name)
    known = ", ".join(bundled_scenarios())
    raise ConfigError(f"no scenario file or bundled scenario named {name_or_path!r} ({known})")


def parse_scenario(text: str, *, source: str, default_name: str = "") -> Scenario:
    """Parse scenario TOML text; ``source`` names it in error messages.

    Raises:
        ConfigError: invalid TOML or invalid fields.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from None
    data.setdefault("name", default_name)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read scenario {path}: {exc}") from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "scenario"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
