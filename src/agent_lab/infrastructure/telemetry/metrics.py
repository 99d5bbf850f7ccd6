"""Histograms from the exported spans: time to first chunk, call, turn and tool
latency, and tokens (GenAI client metrics v1.41.1 where they exist, else ``agent_lab.*``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.metrics import Meter

from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.spans import NS_PER_MS, SpanData

_CALL_KEYS = (sc.PROVIDER_NAME, sc.REQUEST_MODEL, sc.RESPONSE_MODEL, sc.MODE, sc.CALL_ROLE)


class TelemetryMetrics:
    def __init__(self, meter: Meter) -> None:
        self.ttfc = meter.create_histogram(
            sc.METRIC_TTFC, unit="s", description="Time to the provider's first chunk."
        )
        self.visible_ttft = meter.create_histogram(
            "agent_lab.ttft.visible", unit="s", description="Time to the first visible text."
        )
        self.duration = meter.create_histogram(
            sc.METRIC_DURATION, unit="s", description="Model call duration."
        )
        self.tokens = meter.create_histogram(
            sc.METRIC_TOKENS, unit="{token}", description="Tokens per model call."
        )
        self.turn = meter.create_histogram(
            "agent_lab.turn.duration", unit="s", description="Wall time of a user turn."
        )
        self.tool = meter.create_histogram(
            "agent_lab.tool.duration", unit="s", description="Tool execution latency."
        )

    def record(self, spans: Sequence[SpanData]) -> None:
        for span in spans:
            attrs = span.attributes
            operation = attrs.get(sc.OPERATION_NAME)
            if operation == sc.OP_CHAT:
                self._record_call(span)
            elif operation == sc.OP_EXECUTE_TOOL and sc.TOOL_LATENCY_MS in attrs:  # it ran
                keys = (sc.TOOL_NAME, sc.MODE, sc.TOOL_STATUS)
                labels = {key: attrs[key] for key in keys if key in attrs}
                self.tool.record(_ms(attrs.get(sc.TOOL_LATENCY_MS)), labels)
            elif sc.TURN_WALL_MS in attrs:
                labels = {k: attrs[k] for k in (sc.MODE, sc.TURN_STATUS) if k in attrs}
                self.turn.record(_ms(attrs[sc.TURN_WALL_MS]), labels)

    def _record_call(self, span: SpanData) -> None:
        attrs = span.attributes
        labels = {key: attrs[key] for key in _CALL_KEYS if key in attrs}
        self.duration.record((span.end_ns - span.start_ns) / (1000 * NS_PER_MS), labels)
        if sc.RESPONSE_TIME_TO_FIRST_CHUNK in attrs:
            self.ttfc.record(float(_number(attrs[sc.RESPONSE_TIME_TO_FIRST_CHUNK])), labels)
        if sc.VISIBLE_TTFT_MS in attrs:
            self.visible_ttft.record(_ms(attrs[sc.VISIBLE_TTFT_MS]), labels)
        for key, kind in ((sc.USAGE_INPUT_TOKENS, "input"), (sc.USAGE_OUTPUT_TOKENS, "output")):
            if key in attrs:
                self.tokens.record(int(_number(attrs[key])), {**labels, sc.TOKEN_TYPE: kind})


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _ms(value: Any) -> float:
    return _number(value) / 1000
