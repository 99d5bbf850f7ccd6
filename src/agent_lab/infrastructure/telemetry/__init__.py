"""OpenTelemetry GenAI export of the turn record (the optional ``otel`` extra).

Nothing here imports OpenTelemetry until telemetry is switched on, so the product
without the extra behaves, and imports, exactly as before.

* ``live_telemetry(store)`` — a ``LiveTelemetry`` whose ``queues()`` a runtime takes;
  each turn is sent when it ends.
* ``export_session(store, session_id)`` — sends a stored session, with the very same
  spans the live export sent (``agent-lab sessions export ID --format otlp``).

Both build spans with one converter (``convert.turn_spans``) from the turn's audits and
call metrics; see docs/telemetry.md.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Final

from agent_lab.domain.errors import AgentLabError, ConfigError

if TYPE_CHECKING:
    from agent_lab.application.pricing import PriceTable
    from agent_lab.application.session_store import SessionStore
    from agent_lab.infrastructure.telemetry.convert import ConvertOptions
    from agent_lab.infrastructure.telemetry.live import LiveTelemetry, SpanSink

OTEL_INSTALL_HINT: Final = (
    "OpenTelemetry export needs the optional extra: pip install 'agent-lab[otel]'"
)


class TelemetryExportFailed(AgentLabError):
    """The trace backend did not take the spans (unreachable, or it refused them)."""

    code = "telemetry_export_failed"


_NOT_ACCEPTED: Final = (
    "the trace backend did not accept the spans; check OTEL_EXPORTER_OTLP_ENDPOINT"
)
_MODULES: Final = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def is_otel_installed() -> bool:
    """Whether the ``otel`` extra is importable (without importing it)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _MODULES)
    except (ImportError, ValueError):
        return False


def require_otel() -> None:
    """Raises: ConfigError naming the extra when it is not installed."""
    if not is_otel_installed():
        raise ConfigError(OTEL_INSTALL_HINT)


def default_options(prices: PriceTable | None = None) -> ConvertOptions:
    """Content capture from ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    from agent_lab.infrastructure.telemetry.content import capture_enabled
    from agent_lab.infrastructure.telemetry.convert import ConvertOptions

    return ConvertOptions(capture_content=capture_enabled(), prices=prices)


def live_telemetry(
    store: SessionStore | None,
    *,
    sink: SpanSink | None = None,
    options: ConvertOptions | None = None,
) -> LiveTelemetry:
    """Raises: ConfigError when the ``otel`` extra is missing."""
    require_otel()
    from agent_lab.infrastructure.telemetry.live import LiveTelemetry
    from agent_lab.infrastructure.telemetry.otlp import OtlpSink

    return LiveTelemetry(sink or OtlpSink(), store, options or default_options())


def export_session(
    store: SessionStore,
    session_id: str,
    *,
    sink: SpanSink | None = None,
    options: ConvertOptions | None = None,
) -> int:
    """Send a stored session's spans (blocking); returns how many were sent.

    Raises:
        ConfigError: the ``otel`` extra is missing.
        TelemetryExportFailed: the backend did not take the spans.
    """
    require_otel()
    from agent_lab.infrastructure.telemetry.export import session_spans
    from agent_lab.infrastructure.telemetry.live import failure_of
    from agent_lab.infrastructure.telemetry.otlp import OtlpSink

    target = sink or OtlpSink()
    try:
        spans = session_spans(store, session_id, options or default_options())
        if not target.export(spans):
            raise TelemetryExportFailed(failure_of(target, _NOT_ACCEPTED))
    finally:
        target.shutdown()
    return len(spans)
