"""Spans as OTLP/JSON lines, as the Collector's ``file`` exporter and the upstream JSON-file exporter write them: what
``otel-responses report`` reads. The OTLP exporters' own encoder and protobuf's JSON mapping, the ids turned from
base64 (the mapping's bytes) into the hex the OTLP/JSON encoding specifies. For tests and benchmarks, whose virtualenv
cannot hold the upstream exporter (it pins a newer SDK than the floor pass runs)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

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


def write_lines(spans: Sequence[ReadableSpan], path: Path) -> Path:
    """``spans`` into ``path``, one line each (as a ``SimpleSpanProcessor`` exports them)."""
    path.write_text("".join(to_json_line([span]) + "\n" for span in spans), encoding="utf-8")
    return path


def _to_hex(fields: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        value = fields.get(key)
        if isinstance(value, str) and value:
            fields[key] = base64.b64decode(value).hex()
