"""``agent-lab sessions export ID --format otlp``: send a stored session as traces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_lab.interfaces.cli.common import guard, stdout_console
from agent_lab.interfaces.cli.session_ids import find_session
from agent_lab.interfaces.cli.session_queries import open_store
from agent_lab.interfaces.lab import lab_prices

if TYPE_CHECKING:
    from agent_lab.interfaces.settings import LabSettings


def export_otlp(session_id: str, settings: LabSettings) -> None:
    """Send the session's spans to the OTLP endpoint the standard variables name, priced
    as ``run`` and ``sessions show`` price them (the config's ``[prices]`` first)."""
    from agent_lab.infrastructure import telemetry

    with guard():
        telemetry.require_otel()
        with open_store(settings, reading=True) as store:
            session = find_session(store, session_id)
            count = telemetry.export_session(
                store, str(session["id"]), options=telemetry.default_options(lab_prices(settings))
            )
    stdout_console().print(f"sent {count} spans of session {session['id']} over OTLP")
