"""``agent-lab sessions``: list, show, export and delete persisted sessions."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, Any

import orjson
import typer

from agent_lab.application.session_store import SessionStore
from agent_lab.infrastructure.store_factory import open_store as open_store_at
from agent_lab.interfaces.cli.common import (
    DbOption,
    HomeOption,
    LabOptions,
    fail,
    guard,
    help_text,
    stdout_console,
)
from agent_lab.interfaces.cli.render import (
    audit_timeline_table,
    sessions_table,
    transcript_lines,
    turn_metrics_table,
)

SESSIONS_HELP = """List, show, export and delete the sessions saved in the database.

Examples:

  agent-lab sessions list

  agent-lab sessions show 3f2a...

  agent-lab sessions export 3f2a... --format jsonl > session.jsonl

  agent-lab sessions delete 3f2a... --yes
"""

SessionId = Annotated[str, typer.Argument(help="The session id.", show_default=False)]


def build_sessions_app() -> typer.Typer:
    """The ``sessions`` sub-command group."""
    app = typer.Typer(help=help_text(SESSIONS_HELP), no_args_is_help=True)
    app.command(
        "list",
        help="List sessions, newest first.\n\nExamples:\n\n  agent-lab sessions list --json",
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
        "delete",
        help="Delete a session and everything recorded for it.\n\n"
        "Examples:\n\n  agent-lab sessions delete 3f2a... --yes",
    )(delete_session)
    return app


@contextmanager
def open_store(db: Path | None, home: Path | None) -> Iterator[SessionStore]:
    """The session database chosen by --db/--home, the environment or the default."""
    with guard():
        settings = LabOptions(db=db, home=home).settings()
        store = open_store_at(settings.store_location())
        try:
            yield store
        finally:
            store.close()


def list_sessions(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    db: DbOption = None,
    home: HomeOption = None,
) -> None:
    """List sessions, newest first."""
    with open_store(db, home) as store:
        sessions = store.list_sessions()
    if as_json:
        _write_json(sys.stdout, sessions)
    elif not sessions:
        stdout_console().print("no sessions yet; try `agent-lab demo`")
    else:
        stdout_console().print(sessions_table(sessions))


def show_session(session_id: SessionId, db: DbOption = None, home: HomeOption = None) -> None:
    """Print the transcript, per-turn metrics and audit timeline of a session."""
    with open_store(db, home) as store:
        session = _require(store, session_id)
        messages = store.list_messages(session_id)
        summary = store.usage_summary(session_id)
        audits = store.list_audit_logs(session_id)
    console = stdout_console()
    console.print(f"[bold]{session['title']}[/bold]  ({session.get('mode')})")
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
        if not yes and not typer.confirm(f"Delete session {session_id} ({session['title']!r})?"):
            with guard():
                fail("nothing deleted", 1)
        with guard():
            store.delete_session(session_id)
    stdout_console().print(f"deleted session {session_id}")


def session_record(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Everything recorded for a session: summary, messages, audits, usage, tool batches."""
    session = _require(store, session_id)
    return {
        "session": session,
        "messages": store.list_messages(session_id, include_pending=True),
        "audit_logs": store.list_audit_logs(session_id),
        "usage": store.usage_summary(session_id),
        "tool_batches": store.list_batches(session_id),
    }


def _require(store: SessionStore, session_id: str) -> dict[str, Any]:
    session = store.get_session(session_id)
    if session is None:
        with guard():
            fail(f"unknown session id: {session_id!r} (see `agent-lab sessions list`)")
    assert session is not None
    return session


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
