"""``agent-lab sessions``: list, show, export and delete persisted sessions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Annotated, Any

import orjson
import typer
from rich.text import Text

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli.common import (
    fail,
    guard,
    help_text,
    mode_value,
    stdout_console,
)
from agent_lab.interfaces.cli.options import (
    DbOption,
    HomeOption,
    ModeOption,
)
from agent_lab.interfaces.cli.render import (
    audit_timeline_table,
    sessions_table,
    transcript_lines,
    turn_metrics_table,
)
from agent_lab.interfaces.cli.session_ids import find_session
from agent_lab.interfaces.cli.session_queries import (
    StatusOption,
    filtered_sessions,
    older_than,
    open_store,
    parse_age,
)

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
        help="Show a session's transcript, per-turn metrics and audit timeline.\n\n"
        "Examples:\n\n  agent-lab sessions show 3f2a...",
    )(show_session)
    app.command(
        "export",
        help="Export everything recorded for a session as JSON or JSON lines.\n\n"
        "Examples:\n\n  agent-lab sessions export 3f2a... --format jsonl --out s.jsonl",
    )(export_session)
    app.command(
        "prune",
        help="Delete the sessions not updated for a while.\n\n"
        "Examples:\n\n  agent-lab sessions prune --older-than 7d\n\n"
        "  agent-lab sessions prune --older-than 12h --yes",
    )(prune_sessions)
    app.command(
        "delete",
        help="Delete a session and everything recorded for it.\n\n"
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
    mode: ModeOption = None,
    status: StatusOption = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """List sessions, newest first."""
    with open_store(db, home) as store:
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


def show_session(session_id: SessionId, db: DbOption = None, home: HomeOption = None) -> None:
    """Print the transcript, per-turn metrics and audit timeline of a session."""
    with open_store(db, home) as store:
        session = _require(store, session_id)
        session_id = str(session["id"])
        messages = store.list_messages(session_id)
        summary = store.usage_summary(session_id)
        audits = store.list_audit_logs(session_id)
    console = stdout_console()
    console.print(Text.assemble((str(session["title"]), "bold"), f"  ({session.get('mode')})"))
    console.print(f"session {session_id} · created {session.get('created_at')}", style="dim")
    console.rule("transcript")
    for line in transcript_lines(messages):
        console.print(line)
    console.print(turn_metrics_table(summary))
    console.print(audit_timeline_table(audits))


def export_session(
    session_id: SessionId,
    export_format: Annotated[
        str, typer.Option("--format", help="json (one document) or jsonl (one record a line).")
    ] = "json",
    out: Annotated[
        Path | None,
        typer.Option("--out", dir_okay=False, help="Write here instead of stdout."),
    ] = None,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Export everything recorded for a session."""
    if export_format not in ("json", "jsonl"):
        with guard():
            fail(f"unknown format {export_format!r} (use json or jsonl)")
    with open_store(db, home) as store:
        record = session_record(store, session_id)
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
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Delete a session and everything recorded for it."""
    with open_store(db, home) as store:
        session = _require(store, session_id)
        session_id = str(session["id"])
        if not yes and not typer.confirm(f"Delete session {session_id} ({session['title']!r})?"):
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
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """Delete the sessions that were not updated within ``--older-than``."""
    with guard():
        age = parse_age(older)
    console = stdout_console()
    with open_store(db, home) as store:
        stale = older_than(store, age)
        if not stale:
            console.print(f"no session is older than {older}; nothing deleted")
            return
        question = f"Delete {len(stale)} session(s) not updated in the last {older}?"
        if not yes and not typer.confirm(question):
            console.print("nothing deleted")
            return
        with guard():
            for session in stale:
                store.delete_session(str(session["id"]))
    console.print(f"deleted {len(stale)} session(s) older than {older}")


def session_record(store: SQLiteSessionStore, session_id: str) -> dict[str, Any]:
    """Everything recorded for a session: summary, messages, audits, usage, tool batches."""
    session = _require(store, session_id)
    session_id = str(session["id"])
    return {
        "session": session,
        "messages": store.list_messages(session_id, include_pending=True),
        "audit_logs": store.list_audit_logs(session_id),
        "usage": store.usage_summary(session_id),
        "tool_batches": store.list_batches(session_id),
    }


def _require(store: SQLiteSessionStore, session_id: str) -> dict[str, Any]:
    with guard():
        return find_session(store, session_id)
    raise AssertionError("unreachable")  # guard() always raises on failure


def _write_export(stream: IO[str], record: dict[str, Any], export_format: str) -> None:
    if export_format == "json":
        _write_json(stream, record)
        return
    lines = [{"type": "session", **record["session"]}]
    lines += [{"type": "message", **message} for message in record["messages"]]
    lines += [{"type": "audit", **audit} for audit in record["audit_logs"]]
    lines += [{"type": "usage", **call} for call in record["usage"]["calls"]]
    lines += [{"type": "turn", **turn} for turn in record["usage"]["turns"]]
    lines += [{"type": "tool_batch", **batch} for batch in record["tool_batches"]]
    for line in lines:
        stream.write(orjson.dumps(line, default=str).decode() + "\n")


def _write_json(stream: IO[str], value: object) -> None:
    stream.write(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
