"""The command-line options several ``agent-lab`` commands share (typer reads these aliases)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_lab.application.contracts import MAX_EVENT_LOOPS


class TransportChoice(StrEnum):
    """The ``--transport`` values."""

    httpx = "httpx"
    aiohttp = "aiohttp"


class ModeChoice(StrEnum):
    """The ``--mode`` values."""

    dual_agent = "dual_agent"
    chat_agent_tools = "chat_agent_tools"


BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (env OPENAI_BASE_URL). "
        "Without one, the built-in simulated model answers.",
        show_default=False,
    ),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        help="API key for --base-url (env OPENAI_API_KEY); never printed or stored.",
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Chat model name (env AGENT_LAB_MODEL).", show_default=False),
]
EventModelOption = Annotated[
    str | None,
    typer.Option(
        "--event-model",
        help="Model of the event agent's argument calls (default: the chat model).",
        show_default=False,
    ),
]
ModeOption = Annotated[
    ModeChoice | None,
    typer.Option(
        "--mode",
        help="How tools are called: dual_agent (default) or chat_agent_tools.",
        show_default=False,
    ),
]

ModeFilterOption = Annotated[
    ModeChoice | None,
    typer.Option(
        "--mode",
        help="Only sessions of this mode: dual_agent or chat_agent_tools.",
        show_default=False,
    ),
]
"""``--mode`` as a filter: without it every mode is listed, so no default is named."""


def repeatable(flag: str, help_text: str) -> Any:
    """The ``typer.Option`` of a flag given once per value (its values arrive as a list,
    ``None`` when it is not given); ``help_text`` says "(repeatable)" where it reads best."""
    return typer.Option(flag, help=help_text, show_default=False)


ToolOption = Annotated[
    list[str] | None,
    repeatable("--tool", "Enable this tool (repeatable); default: every built-in tool."),
]
MaxLoopsOption = Annotated[
    int | None,
    typer.Option(
        "--max-event-loops",
        min=0,
        max=MAX_EVENT_LOOPS,
        help="Tool rounds allowed per user turn.",
        show_default=False,
    ),
]
SystemOption = Annotated[
    list[str] | None, repeatable("--system", "A system prompt (repeatable); replaces the default.")
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", help="Settings file (TOML, keys as in docs/configuration.md).", dir_okay=False
    ),
]
DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="Session database (env AGENT_LAB_DB).", dir_okay=False),
]
HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Data directory (env AGENT_LAB_HOME).", file_okay=False),
]
PortOption = Annotated[
    int, typer.Option("--port", min=0, max=65535, help="Port (0 picks a free one).")
]
HostOption = Annotated[str, typer.Option("--host", help="Interface to bind.")]
LocalOption = Annotated[
    bool,
    typer.Option("--local", help="Run the bundled small model (needs the 'local' extra)."),
]
TransportOption = Annotated[
    TransportChoice | None,
    typer.Option(
        "--transport",
        help="How requests reach the endpoint: aiohttp (default; less CPU per stream) or "
        "httpx. Env AGENT_LAB_TRANSPORT.",
        show_default=False,
    ),
]
OtelOption = Annotated[
    bool,
    typer.Option("--otel", help="Export each turn as OpenTelemetry traces (the 'otel' extra)."),
]
FastOption = Annotated[
    bool,
    typer.Option("--fast", help="Simulated model without latency (also env AGENT_LAB_SIM_FAST=1)."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the output protocol as JSON lines.")
]
AuditOption = Annotated[
    bool, typer.Option("--audit", help="Include the audit records (with --json, or as lines).")
]
AuditLinesOption = Annotated[
    bool, typer.Option("--audit", help="Also print each audit record as a dim line.")
]
