"""Lab settings and where they come from.

Precedence, highest first: command-line flags > the ``--config`` TOML file > the
environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``AGENT_LAB_MODEL``,
``AGENT_LAB_EVENT_MODEL``, ``AGENT_LAB_HOME``, ``AGENT_LAB_DB``,
``AGENT_LAB_DATABASE_URL``) > defaults.
With no endpoint configured, the lab runs the built-in simulated model.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.domain.errors import ConfigError

SIMULATED_MODEL = "agent-lab-sim"
DEFAULT_TOOLS = [
    "device.volume.adjust",
    "calendar.schedule.create",
    "knowledge.web.search",
    "handoff_note",
    "session.terminate",
]
DEFAULT_SYSTEM_PROMPT = (
    "You are a concise, friendly voice assistant. Answer in one to three short "
    "sentences and use the available tools when the user asks for an action."
)
ENVIRONMENT = {
    "OPENAI_BASE_URL": "base_url",
    "OPENAI_API_KEY": "api_key",
    "AGENT_LAB_MODEL": "model",
    "AGENT_LAB_EVENT_MODEL": "event_model",
    "AGENT_LAB_HOME": "home",
    "AGENT_LAB_DB": "db_path",
    "AGENT_LAB_DATABASE_URL": "database_url",
}


def default_home() -> Path:
    from agent_lab.infrastructure.tool_backends.backends import data_home

    return data_home()


class LabSettings(BaseModel):
    """Everything the lab needs to build a runtime; secrets are ``SecretStr``."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    """An OpenAI-compatible endpoint; ``None`` runs the simulated model."""
    api_key: SecretStr | None = None
    model: str | None = None
    event_model: str | None = None
    mode: ToolInvocationMode = "dual_agent"
    tools: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    max_event_loops: int = Field(default=3, ge=0)
    max_parallel_events: int = Field(default=8, ge=1)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    system_prompts: list[str] = Field(default_factory=lambda: [DEFAULT_SYSTEM_PROMPT])
    home: Path | None = None
    db_path: Path | None = None
    database_url: SecretStr | None = None
    """``postgresql://...`` (a shared PostgreSQL store); wins over ``db_path``."""
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    simulated_ttft_ms: float = Field(default=300.0, ge=0)
    simulated_tokens_per_second: float = Field(default=40.0, ge=0)
    local: bool = False
    """Run the bundled small model through llama.cpp (the ``local`` extra)."""

    @property
    def simulated(self) -> bool:
        return self.base_url is None and not self.local

    def lab_home(self) -> Path:
        return self.home if self.home is not None else default_home()

    def database(self) -> Path:
        return self.db_path if self.db_path is not None else self.lab_home() / "agent-lab.sqlite3"

    def store_location(self) -> str | Path:
        """The PostgreSQL URL when set, else the SQLite file (see ``store_factory``)."""
        url = self.database_url.get_secret_value() if self.database_url else None
        return url or self.database()

    def chat_model(self) -> str:
        if self.model:
            return self.model
        if self.simulated:
            return SIMULATED_MODEL
        if self.local:
            return "local"
        raise ConfigError("no model name: pass --model or set AGENT_LAB_MODEL")

    def secret_key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key is not None else None


def load_settings(
    *,
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LabSettings:
    """Merge the sources by precedence (flags win); ``None`` flag values are ignored.

    Raises:
        ConfigError: a bad TOML file, an unknown key, or a value out of range.
    """
    merged: dict[str, Any] = {}
    merged.update(_from_environment(os.environ if environ is None else environ))
    if config_file is not None:
        merged.update(_from_toml(config_file))
    merged.update({key: value for key, value in (flags or {}).items() if value is not None})
    try:
        return LabSettings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    return {field: environ[name] for name, field in ENVIRONMENT.items() if environ.get(name)}


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    section = data.get("agent_lab", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [agent_lab] must be a table")
    return dict(section)


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{where}: {error['msg']}")
    return "invalid settings: " + "; ".join(problems)
