"""``agent-lab sessions``: list, show, export and delete persisted sessions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Annotated, Any

import orjson
import typer
from rich.text import Text

from agent_lab.application.pricing import PriceTable
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionBusy
from agent_lab.interfaces.cli.common import (
    EXIT_USAGE,
    fail,
    guard,
    help_text,
    mode_value,
    print_error,
    stdout_console,
)
from agent_lab.interfaces.cli.confirm import confirm
from agent_lab.interfaces.cli.options import (
    ConfigOption,
    DbOption,
    HomeOption,
    ModeFilterOption,
)
from agent_lab.interfaces.cli.render import (
    audit_timeline_table,
    sessions_table,
    turn_metrics_table,
)
from agent_lab.interfaces.cli.session_explain import print_explained
from agent_lab.interfaces.cli.session_ids import find_session
from agent_lab.interfaces.cli.session_queries import (
    StatusOption,
    filtered_sessions,
    older_than,
    open_store,
    parse_age,
    store_settings,
)
from agent_lab.interfaces.cli.session_show import print_turns, written_arguments
from agent_lab.interfaces.cli.sessions_otlp import export_otlp
from agent_lab.interfaces.explain_view import explain_turns
from agent_lab.interfaces.lab import lab_prices
from agent_lab.interfaces.turn_views import export_json, export_jsonl, session_export

SESSIONS_HELP = """List, show, export, delete and prune the sessions saved in the database.

A session id can be shortened to any prefix that only one session has.

Examples:

  agent-lab sessions list

  agent-lab sessions show 3f2a...

  agent-lab sessions export 3f2a... --format jsonl > session.jsonl

  agent-lab sessions delete 3f2a... --yes
"""

SessionId = Annotated[
    str, typer.Argument(help="The session id, or a unique prefix of it.", show_default=False)
]


def build_sessions_app() -> typer.Typer:
    """The ``sessions`` sub-command group."""
    app = typer.Typer(help=help_text(SESSIONS_HELP), no_args_is_help=True)
    app.command(
        "list",
        help="List sessions, newest first.\n\nExamples:\n\n  agent-lab sessions list --json\n\n"
        "  agent-lab sessions list --limit 5 --mode dual_agent --status failed\n\n"
        "  agent-lab sessions list --jsonl | jq .id",
    )(list_sessions)
    app.command(
        "show",
        help="Show a session turn by turn: text, tool calls with their arguments, results "
        "and statuses, failure reasons, and cost per call, round, turn and session; then "
        "the per-turn metrics and the audit timeline.\n\n"
        "Examples:\n\n  agent-lab sessions show 3f2a...\n\n"
        "  agent-lab sessions show 3f2a... --explain",
    )(show_session)
    app.command(
        "export",
        help="Export everything recorded for a session as JSON or JSON lines.\n\n"
        "Examples:\n\n  agent-lab sessions export 3f2a... --format jsonl --out s.jsonl",
    )(export_session)
    app.command(
        "prune",
        help="Delete the sessions not updated for a while (a session a live runtime"
        " drives is kept, with an error line).\n\n"
        "Examples:\n\n  agent-lab sessions prune --older-than 7d\n\n"
        "  agent-lab sessions prune --older-than 12h --yes",
    )(prune_sessions)
    app.command(
        "delete",
        help="Delete a session and everything recorded for it (refused while a live"
        " runtime drives it).\n\n"
        "Examples:\n\n  agent-lab sessions delete 3f2a... --yes",
    )(delete_session)
    return app


def list_sessions(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON array.")] = False,
    as_jsonl: Annotated[
        bool, typer.Option("--jsonl", help="Print one JSON object per line.")
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Show at most this many.", show_default=False),
    ] = None,
    mode: ModeFilterOption = None,
    status: StatusOption = None,
    config: ConfigOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """List sessions, newest first."""
    with open_store(store_settings(config, db, home), reading=True) as store:
        sessions = filtered_sessions(store, mode=mode_value(mode), status=status, limit=limit)
    if as_json:
        _write_json(sys.stdout, sessions)
    elif as_jsonl:
        for session in sessions:
            sys.stdout.write(orjson.dumps(session, default=str).decode() + "\n")
    elif not sessions:
        filtered = mode is not None or status is not None
        stdout_console().print(
            "no sessions match" if filtered else "no sessions yet; try `agent-lab demo`"
        )
    else:
        stdout_console().print(sessions_table(sessions))


def show_session(
    session_id: SessionId,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Per turn, what the model saw, what is stored and what was shown, side "
            "by side, with their differences and the repairs a restore applied.",
        ),
    ] = False,
    config: ConfigOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Print every turn (text, tool calls, results, failures, cost) and the audit timeline."""
    settings = store_settings(config, db, home)
    with guard():
        prices = lab_prices(settings)
    with open_store(settings, reading=True) as store:
        session = _require(store, session_id)
        session_id = str(session["id"])
        document = session_export(store, session_id, prices)
        explained = explain_turns(store, session_id, prices) if explain else []
        summary = store.usage_summary(session_id)
        audits = store.list_audit_logs(session_id)
    console = stdout_console()
    console.print(Text.assemble((str(session["title"]), "bold"), f"  ({session.get('mode')})"))
    console.print(f"session {session_id} · created {session.get('created_at')}", style="dim")
    if explain:
        print_explained(console, explained)
        return
    print_turns(console, document["records"], document["cost"], written_arguments(audits))
    status = {turn["turn_index"]: turn["status"] for turn in document["turns"]}
    summary["turns"] = [  # a turn whose runtime stopped reads as the export has it
        {**turn, "status": status.get(turn["turn_index"], turn.get("status"))}
        for turn in summary["turns"]
    ]
    console.print(turn_metrics_table(summary))
    console.print(audit_timeline_table(audits))


def export_session(
    session_id: SessionId,
    export_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="json (one document), jsonl (one record a line), or otlp (send the traces"
            " to OTEL_EXPORTER_OTLP_ENDPOINT; needs the 'otel' extra).",
        ),
    ] = "json",
    out: Annotated[
        Path | None,
        typer.Option("--out", dir_okay=False, help="Write here instead of stdout."),
    ] = None,
    config: ConfigOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Export everything recorded for a session."""
    if export_format not in ("json", "jsonl", "otlp"):
        with guard():
            fail(f"unknown format {export_format!r} (use json, jsonl or otlp)")
    if export_format == "otlp" and out:
        with guard():
            fail("--out does not go with --format otlp: the spans go to the trace backend")
    settings = store_settings(config, db, home)
    if export_format == "otlp":
        return export_otlp(session_id, settings)
    with guard():
        prices = lab_prices(settings)
    with open_store(settings, reading=True) as store:
        record = session_record(store, session_id, prices)
    if out is None:
        _write_export(sys.stdout, record, export_format)
        return
    with guard():
        try:
            with out.open("w", encoding="utf-8") as stream:
                _write_export(stream, record, export_format)
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}", 1)


def delete_session(
    session_id: SessionId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    config: ConfigOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Delete a session and everything recorded for it."""
    with open_store(store_settings(config, db, home)) as store:
        session = _require(store, session_id)
        session_id = str(session["id"])
        if not yes and not confirm(f"Delete session {session_id} ({session['title']!r})?"):
            stdout_console().print("nothing deleted")
            return
        with guard():
            store.delete_session(session_id)
    stdout_console().print(f"deleted session {session_id}")


def prune_sessions(
    older: Annotated[
        str,
        typer.Option("--older-than", help="Age since the last update: 7d, 12h, 30m, 90s or 2w."),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    config: ConfigOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Delete the sessions that were not updated within ``--older-than``.

    A session a live runtime drives (``agent-lab chat``, the web lab) is kept: one
    ``error:`` line for each, and exit code 2 after the others are deleted.
    """
    with guard():
        age = parse_age(older)
    console = stdout_console()
    with open_store(store_settings(config, db, home)) as store:
        stale = older_than(store, age)
        if not stale:
            console.print(f"no session is older than {older}; nothing deleted")
            return
        question = f"Delete {len(stale)} session(s) not updated in the last {older}?"
        if not yes and not confirm(question):
            console.print("nothing deleted")
            return
        with guard():
            busy = _delete_unless_driven(store, [str(session["id"]) for session in stale])
    console.print(f"deleted {len(stale) - len(busy)} session(s) older than {older}")
    for refusal in busy:
        print_error(str(refusal))
    if busy:
        raise typer.Exit(EXIT_USAGE)


def _delete_unless_driven(store: SessionStore, session_ids: list[str]) -> list[SessionBusy]:
    """Delete each session; those a live runtime drives are kept: their refusals."""
    busy: list[SessionBusy] = []
    for session_id in session_ids:
        try:
            store.delete_session(session_id)
        except SessionBusy as exc:
            busy.append(exc)
    return busy


def session_record(store: SessionStore, session_id: str, prices: PriceTable) -> dict[str, Any]:
    """The session's export document (the schema the web lab exports too)."""
    session = _require(store, session_id)
    return session_export(store, str(session["id"]), prices)


def _require(store: SessionStore, session_id: str) -> dict[str, Any]:
    with guard():
        return find_session(store, session_id)
    raise AssertionError("unreachable")  # guard() always raises on failure


def _write_export(stream: IO[str], record: dict[str, Any], export_format: str) -> None:
    if export_format == "json":
        stream.write(export_json(record))
        return
    stream.write(export_jsonl(record))


def _write_json(stream: IO[str], value: object) -> None:
    stream.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
