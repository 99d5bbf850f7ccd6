"""Lab settings and where they come from.

Precedence, highest first: command-line flags > the ``--config`` TOML file >
``./agent-lab.toml`` > ``$XDG_CONFIG_HOME/agent-lab/config.toml`` > the environment
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``AGENT_LAB_MODEL``, ``AGENT_LAB_EVENT_MODEL``,
``AGENT_LAB_HOME``, ``AGENT_LAB_DB``, ``AGENT_LAB_DATABASE_URL``, ``AGENT_LAB_TRANSPORT``)
> defaults. The two
discovered files are read when ``discover`` is set (the CLI does). With no endpoint
configured, the lab runs the built-in simulated model.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from agent_lab.application.contracts import MAX_EVENT_LOOPS, ToolInvocationMode
from agent_lab.application.pricing import Price
from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.openai_compat.secret_mask import redact_url

SIMULATED_MODEL = "agent-lab-sim"
PROJECT_CONFIG_NAME = "agent-lab.toml"
USER_CONFIG_NAME = "config.toml"
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
    "AGENT_LAB_OTEL": "otel",
    "AGENT_LAB_DATABASE_URL": "database_url",
    "AGENT_LAB_TRANSPORT": "transport",
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
    transport: Literal["httpx", "aiohttp"] = "aiohttp"
    """How requests reach the endpoint (``openai_transport``): ``aiohttp`` costs less CPU
    per stream than ``httpx``, which matters with many concurrent streams."""
    event_model: str | None = None
    mode: ToolInvocationMode = "dual_agent"
    tools: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    max_event_loops: int = Field(default=3, ge=0, le=MAX_EVENT_LOOPS)
    max_parallel_events: int = Field(default=8, ge=1)
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    event_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """The event agent's forced argument calls (0: the same arguments every time; a
    reasoning model that accepts only its default, such as OpenAI's o-series, wants 1)."""
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
    prices: dict[str, Price] = Field(default_factory=dict)
    """Price overrides by model name (``[prices."model"]`` in the config file)."""
    otel: bool = False
    """Export every turn as OpenTelemetry GenAI traces (the ``otel`` extra)."""

    @field_validator("tools")
    @classmethod
    def _each_tool_once(cls, tools: list[str]) -> list[str]:
        """A tool named again (``--tool x --tool x``, a config list) is the same tool."""
        return list(dict.fromkeys(tools))

    @property
    def simulated(self) -> bool:
        return self.base_url is None and not self.local

    def lab_home(self) -> Path:
        return self.home.expanduser() if self.home is not None else default_home()

    def database(self) -> Path:
        if self.db_path is not None:
            return self.db_path.expanduser()
        return self.lab_home() / "agent-lab.sqlite3"

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
        url = self.base_url or ""
        parts = urlsplit(url)
        models = urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/models"))
        raise ConfigError(
            f"no model name for {redact_url(url)}: pass --model or set AGENT_LAB_MODEL"
            f" (GET {redact_url(models)} lists them)"
        )

    def secret_key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key is not None else None


class SettingSources(TypedDict, total=False):
    """Where settings come from, besides the defaults (see ``resolve_settings``)."""

    flags: Mapping[str, Any] | None
    config_file: Path | None
    environ: Mapping[str, str] | None
    discover: bool


def load_settings(**sources: Unpack[SettingSources]) -> LabSettings:
    """Merge the sources by precedence (flags win); ``None`` flag values are ignored.

    ``discover`` also reads ``./agent-lab.toml`` and the user's
    ``$XDG_CONFIG_HOME/agent-lab/config.toml`` (see ``config_files``).

    Raises:
        ConfigError: a bad TOML file, an unknown key, or a value out of range.
    """
    return resolve_settings(**sources).settings


class ResolvedSettings(BaseModel):
    """Settings with the source of every field: ``flag``, a file path, ``env NAME``, ``default``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    settings: LabSettings
    origins: dict[str, str]
    files: list[Path]
    """The config files that were read, lowest precedence first."""


def resolve_settings(
    *,
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    discover: bool = False,
) -> ResolvedSettings:
    """``load_settings`` that also says where each setting came from.

    Raises:
        ConfigError: a bad TOML file, an unknown key, or a value out of range.
    """
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, field in ENVIRONMENT.items():
        if environ.get(name):
            merged[field] = environ[name]
            origins[field] = f"env {name}"
    files = config_files(environ) if discover else []
    if config_file is not None:
        files.append(config_file)
    for path in files:
        values = _from_toml(path)
        merged.update(values)
        origins.update(dict.fromkeys(values, str(path)))
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    merged.update(given)
    origins.update(dict.fromkeys(given, "flag"))
    try:
        settings = LabSettings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins)) from None
    for name in LabSettings.model_fields:
        origins.setdefault(name, "default")
    return ResolvedSettings(settings=settings, origins=origins, files=files)


def config_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The discovered config files that exist, lowest precedence first.

    ``$XDG_CONFIG_HOME/agent-lab/config.toml`` (default ``~/.config``), then
    ``./agent-lab.toml`` in the current directory, which wins over the user's file.
    """
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    candidates = [base / "agent-lab" / USER_CONFIG_NAME]
    with contextlib.suppress(OSError):  # the current directory may have been removed
        candidates.append(Path.cwd() / PROJECT_CONFIG_NAME)
    return [path for path in candidates if _is_file(path)]


def _is_file(path: Path) -> bool:
    """Whether the config file exists.

    Raises:
        ConfigError: this user may not look into its folder (say ``HOME`` is another
            user's), naming the file.
    """
    try:
        return path.is_file()
    except PermissionError:
        raise ConfigError(
            f"cannot read the config file {path}: permission denied (set XDG_CONFIG_HOME"
            " or HOME to a folder this user may read)"
        ) from None


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory") from None
    except PermissionError:
        raise ConfigError(f"cannot read the config file {path}: permission denied") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    section = data.get("agent_lab", data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [agent_lab] must be a table")
    if section is not data and "prices" in data:  # a top-level [prices] next to [agent_lab]
        section = {**section, "prices": {**data["prices"], **section.get("prices", {})}}
    for key in section:
        if key not in LabSettings.model_fields:
            raise ConfigError(f"{path}: unknown key {key!r}{_closest(key)}")
    return dict(section)


def _closest(key: str) -> str:
    matches = difflib.get_close_matches(key, list(LabSettings.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(m) for m in matches)}?)" if matches else ""


def _describe(exc: ValidationError, origins: Mapping[str, str]) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "settings"
        origin = origins.get(str(error["loc"][0])) if error["loc"] else None
        source = f" (from {origin})" if origin else ""
        problems.append(f"{where}{source}: {error['msg']}")
    return "invalid settings: " + "; ".join(problems)
