"""Sending spans and metrics with the OpenTelemetry SDK (the ``otel`` extra).

Imported only when telemetry is switched on. Spans are built as finished
``ReadableSpan``s with the converter's ids and times and handed to a span exporter,
by default OTLP over HTTP configured by the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_TIMEOUT``, ...), with the resource
from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service ``agent-lab`` when
none is given). ``OTEL_METRICS_EXPORTER=none`` turns the metrics off, e.g. for a
trace-only backend. An unreachable backend fails an export at once and is named in
``failure`` (see ``reachability``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.metadata import version

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.metrics import TelemetryMetrics
from agent_lab.infrastructure.telemetry.reachability import (
    BackendUnreachable,
    Reachability,
    quiet_logs,
    session_for,
)
from agent_lab.infrastructure.telemetry.spans import SpanData

DEFAULT_SERVICE = "agent-lab"
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_CODES = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}


def resource() -> Resource:
    """The standard resource (environment first), named ``agent-lab`` by default."""
    found = Resource.create({})
    name = str(found.attributes.get(SERVICE_NAME, ""))
    if not name or name.startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
    return found


def scope() -> InstrumentationScope:
    return InstrumentationScope(sc.INSTRUMENTATION_NAME, version("agent-lab"), sc.SCHEMA_URL)


def readable_spans(
    spans: Sequence[SpanData], *, resource_: Resource, scope_: InstrumentationScope
) -> list[ReadableSpan]:
    return [_readable(span, resource_, scope_) for span in spans]


def _readable(span: SpanData, resource_: Resource, scope_: InstrumentationScope) -> ReadableSpan:
    flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=flags)
    parent = None
    if span.parent_id is not None:
        parent = SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=flags)
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource_,
        attributes=dict(span.attributes),
        events=[Event(e.name, dict(e.attributes), e.time_ns) for e in span.events],
        kind=_KINDS[span.kind],
        status=Status(_CODES[span.status], span.status_message),
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=scope_,
    )


class OtlpSink:
    """Where finished spans and their metrics go.

    Args:
        span_exporter: Defaults to OTLP over HTTP from the standard variables.
        metric_reader: Defaults to a periodic OTLP reader, or none when
            ``OTEL_METRICS_EXPORTER=none``.
    """

    def __init__(
        self,
        span_exporter: SpanExporter | None = None,
        metric_reader: MetricReader | None = None,
    ) -> None:
        self.resource = resource()
        self.scope = scope()
        self.reachability = Reachability()
        if span_exporter is None or metric_reader is None:
            quiet_logs()
        self._exporter = span_exporter or _default_span_exporter(self.reachability)
        reader = (
            metric_reader
            if metric_reader is not None
            else _default_metric_reader(self.reachability)
        )
        self._meters = MeterProvider(
            resource=self.resource, metric_readers=[reader] if reader is not None else []
        )
        self.metrics = TelemetryMetrics(self._meters.get_meter(sc.INSTRUMENTATION_NAME))

    def export(self, spans: Sequence[SpanData], *, with_metrics: bool = True) -> bool:
        """Send ``spans`` (blocking: call from a worker thread); True when accepted."""
        if not spans:
            return True
        readable = readable_spans(spans, resource_=self.resource, scope_=self.scope)
        try:
            result = self._exporter.export(readable)
        except BackendUnreachable:  # raised through by older exporter releases
            result = SpanExportResult.FAILURE
        if with_metrics:
            self.metrics.record(spans)
        return result is SpanExportResult.SUCCESS

    @property
    def failure(self) -> str | None:
        """Why the last export failed (one line), if the exporters found out."""
        return self.reachability.failure

    def shutdown(self) -> None:
        """Flush the metrics and close the exporters (blocking)."""
        self._meters.shutdown()
        self._exporter.shutdown()


def _default_span_exporter(reachability: Reachability) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(session=session_for(reachability))


def _default_metric_reader(reachability: Reachability) -> MetricReader | None:
    if os.environ.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() == "none":
        return None
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return PeriodicExportingMetricReader(OTLPMetricExporter(session=session_for(reachability)))
