"""Plain span records: what the report reads from a span, whether it came from a file or from the SDK.

The page is built from these and nothing else, so it can only ever show what the spans carry. Only this
package's spans are kept, told apart by their instrumentation scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

# The instrumentation scope of this package's spans (the tracer is named after the module that makes it): any scope
# in the package, so traces written by an earlier or later layout of it are read too.
SCOPE_PREFIX: Final = "otel_responses"
UNKNOWN_SERVICE: Final = "unknown_service"

Value: TypeAlias = "str | bool | int | float | tuple[Value, ...] | None"


@dataclass(frozen=True, slots=True)
class EventRecord:
    name: str
    time_ns: int
    attributes: Mapping[str, Value]


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One span: ids as lowercase hex, times in nanoseconds since the epoch."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Value]
    events: tuple[EventRecord, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id) of each linked span
    service: str = UNKNOWN_SERVICE
    scope: str = SCOPE_PREFIX
    parent_span_id: str | None = None
    error: bool = False  # the span's status is ERROR

    def text(self, key: str) -> str | None:
        value = self.attributes.get(key)
        return value if isinstance(value, str) and value else None

    def number(self, key: str) -> int | None:
        value = self.attributes.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return int(value)

    def flag(self, key: str) -> bool | None:
        value = self.attributes.get(key)
        return value if isinstance(value, bool) else None

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.attributes.get(key)
        if isinstance(value, str):
            return (value,)
        if isinstance(value, tuple):
            return tuple(str(v) for v in value if v is not None)
        return ()


def is_own(scope: str | None) -> bool:
    """Whether a span of this instrumentation scope was made by this package."""
    return scope is not None and (scope == SCOPE_PREFIX or scope.startswith(SCOPE_PREFIX + "."))


def value_of(raw: object) -> Value:
    """An SDK attribute value as a record value (sequences become tuples)."""
    if raw is None or isinstance(raw, (str, bool, int, float)):
        return raw
    if isinstance(raw, (list, tuple)):
        return tuple(value_of(v) for v in raw)
    return str(raw)


def _attributes(raw: Mapping[str, object] | None) -> dict[str, Value]:
    return {str(k): value_of(v) for k, v in (raw or {}).items()}


def _hex(number: int, width: int) -> str:
    return format(number, f"0{width}x")


def from_sdk(spans: Iterable[Any]) -> Iterator[SpanRecord]:
    """Records of the SDK's finished spans (``ReadableSpan``; read by attribute, so the SDK need not be imported),
    this package's only."""
    for span in spans:
        scope = getattr(getattr(span, "instrumentation_scope", None), "name", None)
        if not is_own(scope):
            continue
        context = span.context
        parent = getattr(span, "parent", None)
        resource = getattr(getattr(span, "resource", None), "attributes", None) or {}
        service = resource.get("service.name")
        status = getattr(getattr(span, "status", None), "status_code", None)
        yield SpanRecord(
            trace_id=_hex(context.trace_id, 32),
            span_id=_hex(context.span_id, 16),
            name=str(span.name),
            start_ns=int(span.start_time or 0),
            end_ns=int(span.end_time or span.start_time or 0),
            attributes=_attributes(span.attributes),
            events=tuple(
                EventRecord(str(e.name), int(e.timestamp or 0), _attributes(e.attributes)) for e in span.events
            ),
            links=tuple((_hex(k.context.trace_id, 32), _hex(k.context.span_id, 16)) for k in span.links),
            service=service if isinstance(service, str) and service else UNKNOWN_SERVICE,
            scope=str(scope),
            parent_span_id=_hex(parent.span_id, 16) if parent is not None else None,
            error=getattr(status, "name", None) == "ERROR",
        )
