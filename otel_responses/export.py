"""A span exporter that writes OTLP/JSON lines as the Collector's ``file`` exporter does, for apps without a Collector.

Each export is one ``ExportTraceServiceRequest`` as a line of JSON, encoded by the OTLP exporters' own encoder
(``opentelemetry-exporter-otlp-proto-common``) and protobuf's JSON mapping, with the ids turned from base64 (the
mapping's bytes) into the hex the OTLP/JSON encoding specifies. ``otel-responses report FILE`` reads it::

    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from otel_responses.export import OTLPJsonFileExporter

    provider.add_span_processor(BatchSpanProcessor(OTLPJsonFileExporter("traces.jsonl")))

It needs the SDK and protobuf (the ``export`` extra), which is why nothing else in the package
imports it: the pytest plugin and the report reader stay free of protobuf.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["OTLPJsonFileExporter", "to_json_line"]

_log = logging.getLogger(__name__)
_SPAN_IDS = ("traceId", "spanId", "parentSpanId")
_LINK_IDS = ("traceId", "spanId")


def to_json_line(spans: Sequence[ReadableSpan]) -> str:
    """One OTLP/JSON line (without its newline) holding ``spans``."""
    document: dict[str, Any] = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                _to_hex(span, _SPAN_IDS)
                for link in span.get("links", ()):
                    _to_hex(link, _LINK_IDS)
    return json.dumps(document, separators=(",", ":"))


def _to_hex(fields: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        value = fields.get(key)
        if isinstance(value, str) and value:
            fields[key] = base64.b64decode(value).hex()


class OTLPJsonFileExporter(SpanExporter):
    """Appends one OTLP/JSON line per export to ``path`` (or writes to an open text ``stream``, left open)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, stream: TextIO | None = None) -> None:
        if path is not None and stream is None:
            self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115  # open until shutdown()
        elif stream is not None and path is None:
            self._file = stream
        else:
            raise TypeError("give a path or a stream, not both")
        self._owned = path is not None
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            line = to_json_line(spans)
            with self._lock:
                self._file.write(line + "\n")
                self._file.flush()
        except Exception as error:  # an exporter never raises into the SDK; the reason only, never a span
            _log.warning("otel-responses: writing spans failed (%s)", type(error).__name__)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            if not self._closed:
                self._file.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned:
                self._file.close()
            else:
                self._file.flush()
