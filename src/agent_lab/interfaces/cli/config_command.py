"""``agent-lab config``: the effective settings and where each one came from."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import orjson
import typer
from pydantic import SecretStr
from rich.table import Table

from agent_lab.infrastructure.openai_compat.secret_mask import redact_url
from agent_lab.interfaces.cli.common import (
    guard,
    stdout_console,
)
from agent_lab.interfaces.cli.flags import ENDPOINT_FLAGS, STORE_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.settings import (
    PROJECT_CONFIG_NAME,
    USER_CONFIG_NAME,
    ResolvedSettings,
    resolve_settings,
)

CONFIG_HELP = f"""Show the effective settings and where each came from: flag, file, env or default.

Settings come, highest first, from flags, --config FILE, ./{PROJECT_CONFIG_NAME},
$XDG_CONFIG_HOME/agent-lab/{USER_CONFIG_NAME} (default ~/.config), the environment and
the defaults. Secrets are shown as ***, also the credentials in a base URL
(user:pass@, api-key=, key=, token=).

Examples:

  agent-lab config

  agent-lab config --config lab.toml --json
"""

MASK = "***"


@lab_flags(*ENDPOINT_FLAGS, "config", *STORE_FLAGS, "as_json")
def show_config(
    options: LabOptions,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Print the effective settings with their sources (see ``CONFIG_HELP``)."""
    with guard():
        resolved = resolve_settings(
            flags=options.flags(), config_file=options.config, discover=True
        )
        rows = effective_rows(resolved)
    if as_json:
        document = {
            "files": [str(path) for path in resolved.files],
            "settings": {name: {"value": value, "source": source} for name, value, source in rows},
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    table = Table(title="effective settings")
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for name, value, source in rows:
        table.add_row(name, _shown(value), source)
    console = stdout_console()
    console.print(table)
    files = ", ".join(str(path) for path in resolved.files) or "none found"
    console.print(f"config files read: {files}", markup=False, style="dim")


def effective_rows(resolved: ResolvedSettings) -> list[tuple[str, Any, str]]:
    """``(name, value, source)`` per setting, secrets masked, derived paths filled in."""
    settings = resolved.settings
    rows: list[tuple[str, Any, str]] = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = MASK
        elif name == "base_url" and value:
            value = redact_url(value)  # user:pass@ and secret query values
        source = resolved.origins[name]
        if name == "home" and value is None:
            value, source = str(settings.lab_home()), "default (the platform's data directory)"
        elif name == "db_path" and value is None:
            value, source = str(settings.database()), "default (<home>/agent-lab.sqlite3)"
        elif name == "model" and value is None and settings.simulated:
            value, source = settings.chat_model(), "default (the simulated model)"
        rows.append((name, _plain(value), source))
    return rows


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _shown(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)
