"""The command-line flags that shape the lab's settings, and the checks on them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_lab.domain import errors
from agent_lab.interfaces.settings import LabSettings, load_settings

FAST_ENV = "AGENT_LAB_SIM_FAST"


def fast_from_env() -> bool:
    """``AGENT_LAB_SIM_FAST`` is set to a true value."""
    return os.environ.get(FAST_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class LabOptions:
    """The command-line flags that shape the lab's settings (``None`` = not given)."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    transport: str | None = None
    event_model: str | None = None
    mode: str | None = None
    tools: tuple[str, ...] = ()
    max_event_loops: int | None = None
    system: tuple[str, ...] = ()
    config: Path | None = None
    db: Path | None = None
    home: Path | None = None
    local: bool = False
    otel: bool = False
    fast: bool = False
    offline: bool = False
    """Ignore any configured endpoint: the simulated model (or ``--local``) only."""

    def flags(self) -> dict[str, Any]:
        """The settings fields these flags set (``None`` values are ignored later)."""
        flags: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "model": self.model,
            "transport": self.transport,
            "event_model": self.event_model,
            "mode": self.mode,
            "tools": list(self.tools) or None,
            "max_event_loops": self.max_event_loops,
            "system_prompts": list(self.system) or None,
            "db_path": self.db,
            "home": self.home,
            "local": True if self.local else None,
            "otel": True if self.otel else None,
        }
        if self.fast or fast_from_env():
            flags.update(simulated_ttft_ms=0.0, simulated_tokens_per_second=0.0)
        return flags

    def settings(self, **overrides: Any) -> LabSettings:
        """Merge flags, ``--config``, environment and defaults (flags win).

        Raises:
            ConfigError: bad TOML, unknown keys or values out of range.
        """
        settings = load_settings(flags=self.flags(), config_file=self.config, discover=True)
        check_home(settings)
        if self.offline:
            overrides = {"base_url": None, **overrides}
        return settings.model_copy(update=overrides) if overrides else settings


def check_home(settings: LabSettings) -> None:
    """Fail with a plain message when the data directory or the database's folder is a file.

    Raises:
        ConfigError: ``home`` (``--home``, ``AGENT_LAB_HOME``) or the database's folder is
            an existing file.
    """
    home = settings.home
    if home is not None and home.expanduser().is_file():
        raise errors.ConfigError(
            f"the data directory {home} is a file, not a directory "
            "(point --home or AGENT_LAB_HOME at a directory)"
        )
    if settings.db_path is not None and settings.db_path.expanduser().parent.is_file():
        raise errors.ConfigError(
            f"the database's folder {settings.db_path.parent} is a file, not a directory"
        )
