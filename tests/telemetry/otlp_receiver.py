"""A real OTLP/HTTP receiver on 127.0.0.1: decodes the protobuf requests it is sent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


@dataclass
class Received:
    url: str
    spans: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    headers: list[dict[str, str]] = field(default_factory=list)

    def take_spans(self) -> list[dict[str, Any]]:
        taken, self.spans = self.spans, []
        return sorted(taken, key=lambda span: span["spanId"])


@contextmanager
def otlp_receiver() -> Iterator[Received]:
    received = Received(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.headers.append(dict(self.headers.items()))
            if self.path == "/v1/traces":
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                for resource_spans in MessageToDict(request).get("resourceSpans", []):
                    received.resources.append(resource_spans.get("resource", {}))
                    for scope_spans in resource_spans.get("scopeSpans", []):
                        received.spans += scope_spans.get("spans", [])
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            else:
                request_m = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                for resource_metrics in MessageToDict(request_m).get("resourceMetrics", []):
                    for scope_metrics in resource_metrics.get("scopeMetrics", []):
                        received.metric_names |= {m["name"] for m in scope_metrics["metrics"]}
                reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
