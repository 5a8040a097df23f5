"""An OTLP/HTTP receiver on loopback, for a process that exports as a deployed one does (``OTEL_TRACES_EXPORTER=otlp``,
protobuf over HTTP): it keeps every body it is sent, raw (to search for what must never leave a process) and decoded
into spans (the SDK's protobuf messages, from ``opentelemetry-proto``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ..servers import QuietHTTPServer


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span: ids in hex, the instrumentation scope's name, its attributes as plain values, and the
    ``service.instance.id`` of the process that made it."""

    name: str
    scope: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    attributes: dict[str, Any]
    instance: str | None

    def signals(self) -> set[str]:
        return set(self.attributes.get("openai_responses.signals", ()))


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind is not None else None


def _instance(resource: Any) -> str | None:
    found = [_value(kv.value) for kv in resource.attributes if kv.key == "service.instance.id"]
    return str(found[0]) if found else None


def _spans(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest.FromString(body)
    return [
        ReceivedSpan(
            span.name,
            scope_spans.scope.name,
            span.trace_id.hex(),
            span.span_id.hex(),
            span.parent_span_id.hex() or None,
            span.start_time_unix_nano,
            {kv.key: _value(kv.value) for kv in span.attributes},
            _instance(resource_spans.resource),
        )
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


class OTLPReceiver:
    """Answers every POST with 200; ``bodies`` holds each one by path, ``spans`` the decoded trace exports."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver._keep(self.path, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _keep(self, path: str, body: bytes) -> None:
        spans = _spans(body) if path == "/v1/traces" else []
        with self._lock:
            self.bodies.setdefault(path, []).append(body)
            self.spans.extend(spans)

    def __enter__(self) -> OTLPReceiver:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def raw(self) -> bytes:
        """Every body received, of every signal, joined."""
        with self._lock:
            return b"".join(body for bodies in self.bodies.values() for body in bodies)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], since: int = 0, timeout: float = 30, settle: float = 0.6
    ) -> list[ReceivedSpan]:
        """The spans received after the first ``since``, once ``done`` holds for them, and after ``settle`` seconds
        more (a span exported late, or twice, is then among them too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spans = self.spans[since:]
            if done(spans):
                time.sleep(settle)
                with self._lock:
                    return self.spans[since:]
            time.sleep(0.05)
        with self._lock:
            return self.spans[since:]
