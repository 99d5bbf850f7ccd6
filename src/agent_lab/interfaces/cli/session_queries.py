"""What ``agent-lab sessions`` and ``replay`` ask of the store: opening it, filters, ages.

Every command that reads stored sessions opens them with ``open_store``: the store the
settings name (``LabSettings.store_location()``), the very one ``run``, ``chat`` and
``serve`` write to: the PostgreSQL database of ``database_url``
(``AGENT_LAB_DATABASE_URL``) when it is set, else the SQLite file (``--db``,
``AGENT_LAB_DB``, ``<home>/agent-lab.sqlite3``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_lab.application.session_store import ClaimListing, SessionStore
from agent_lab.domain.errors import PersistenceFailed, UsageError
from agent_lab.infrastructure import store_factory
from agent_lab.interfaces.cli.common import (
    guard,
)
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.settings import LabSettings

STATUSES = ("completed", "terminated", "failed", "cancelled", "running", "empty")
"""A session's status: the status of its last turn (``empty``: no turn yet)."""

StatusOption = Annotated[
    str | None,
    typer.Option(
        "--status",
        help=f"Only sessions whose last turn is {', '.join(STATUSES[:-1])} (or empty).",
        show_default=False,
    ),
]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def store_settings(config: Path | None, db: Path | None, home: Path | None) -> LabSettings:
    """The settings of a command that only reads the store (``--config``, ``--db``,
    ``--home``, then the environment and the config files)."""
    with guard():
        return LabOptions(config=config, db=db, home=home).settings()
    raise AssertionError("unreachable")  # guard() always raises on failure


@contextmanager
def open_store(settings: LabSettings, *, reading: bool = False) -> Iterator[SessionStore]:
    """The configured session store (see the module docstring), closed afterwards.

    A command that only reads (``reading``) still reads an SQLite file this user may
    not write, or what is left of a damaged file: where opening it for writing fails
    as read-only or corrupt, it is opened for reading only. Errors inside the block
    become one stderr line and an exit code, as in ``guard``.
    """
    with guard():
        store = _open(settings.store_location(), reading=reading)
        try:
            yield store
        finally:
            store.close()


def _open(location: str | Path, *, reading: bool) -> SessionStore:
    try:
        return store_factory.open_store(location)
    except PersistenceFailed as exc:
        if not reading or exc.reason not in _READABLE or store_factory.is_postgres_url(location):
            raise
    return store_factory.open_store(location, read_only=True)


_READABLE = ("read_only", "corrupt")
"""Failures to open for writing after which a reading command reads the file read-only
(a damaged file: what is left of it, never written to)."""


def session_status(store: SessionStore, session_id: str) -> str:
    """The status of the session's last turn, or ``empty``."""
    turns = store.usage_summary(session_id).get("turns") or []
    return str(turns[-1].get("status") or "running") if turns else "empty"


def filtered_sessions(
    store: SessionStore,
    *,
    mode: str | None = None,
    status: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The sessions, newest first, that have ``mode`` and ``status``; at most ``limit``.
    Each has ``held_by``: the live runtime (of any process) driving it now, or ``None``.

    Raises:
        UsageError: an unknown status.
    """
    if status is not None and status not in STATUSES:
        raise UsageError(f"unknown status {status!r} (use one of {', '.join(STATUSES)})")
    held = store.live_claims() if isinstance(store, ClaimListing) else {}
    found = []
    for session in store.list_sessions():
        if mode is not None and session.get("mode") != mode:
            continue
        if status is not None and session_status(store, str(session["id"])) != status:
            continue
        found.append({**session, "held_by": held.get(str(session["id"]))})
        if limit is not None and len(found) >= limit:
            break
    return found


def parse_age(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``90s`` or ``2w`` as a duration.

    Raises:
        UsageError: not a number followed by one of s, m, h, d, w.
    """
    match = _AGE.match(text)
    if match is None:
        raise UsageError(f"cannot read the age {text!r} (use e.g. 7d, 12h, 30m, 90s or 2w)")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def older_than(
    store: SessionStore, age: timedelta, now: datetime | None = None
) -> list[dict[str, Any]]:
    """The sessions last updated more than ``age`` ago, newest first."""
    cutoff = (now or datetime.now(UTC)) - age
    return [
        session
        for session in store.list_sessions()
        if _timestamp(session.get("updated_at") or session.get("created_at")) < cutoff
    ]


def _timestamp(value: Any) -> datetime:
    try:
        stamp = datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.now(UTC)  # unreadable: never old enough to prune
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
