"""Reading OTLP/JSON trace files as the OpenTelemetry Collector's ``file`` exporter writes them, with ``json`` only.

One ``ExportTraceServiceRequest`` object per line, ids in hex (the OTLP/JSON encoding) or base64 (protobuf's own
JSON mapping); the file may be gzip-compressed by the user, or zstd-compressed by the exporter (``compression:
zstd``: one stream of lines, or, in older Collectors, each object a frame of its own behind a 4-byte length). zstd
needs Python 3.14's ``compression.zstd`` or the ``zstandard`` package. A bad line is a ``Problem`` naming the file
and line, and reading goes on; a problem never quotes the file's content (it may hold another instrumentation's
payloads).

Lines that are not JSON at all (they start with neither ``{`` nor ``[``) are the app's own output, when the spans were
written to standard output beside it (``opentelemetry-instrument --traces_exporter otlp_json_file``): they are
counted and named once per file, as a note, not a problem. The console exporter's output (an indented JSON object
per span) is recognised and named as such, in one problem, with how to write OTLP/JSON instead.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import importlib
import io
import json
import math
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any, Final

from ...version import install_hint
from .records import UNKNOWN_SERVICE, EventRecord, SpanRecord, Value, is_own

STDIN: Final = "-"
ZSTD_PACKAGE: Final = "zstandard"
_GZIP_MAGIC: Final = b"\x1f\x8b"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_HEX = re.compile(r"[0-9a-fA-F]+")
_STATUS_ERROR: Final = (2, "STATUS_CODE_ERROR")
_OTHER_SIGNALS: Final = ("resourceMetrics", "resourceLogs", "resourceProfiles")
_MAX_DEPTH: Final = 8  # nested array values deeper than this are not attributes this package writes
# What the SDK's console exporters print: an indented JSON object per span (``"kind": "SpanKind.CLIENT"``) or per
# collection of metrics, over many lines.
_CONSOLE = re.compile(rb'^\s*"(?:kind": "SpanKind\.|resource_metrics": \[)')
CONSOLE_HINT: Final = (
    "the console exporter's output (an indented JSON object per span), not OTLP/JSON: write OTLP/JSON lines instead, "
    "e.g. `opentelemetry-instrument --traces_exporter otlp_json_file` (pip install "
    "opentelemetry-exporter-otlp-json-file), its FileSpanExporter in code, or the Collector's file exporter"
)


@dataclass(frozen=True, slots=True)
class Problem:
    """Why part of an input could not be read; ``line`` counts lines (or, in framed zstd files, records)."""

    source: str
    line: int | None
    message: str
    missing: str | None = None  # the package that would read it, when that is all that is wrong

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(slots=True)
class Reading:
    """What the inputs held: this package's spans, the problems met, and what was skipped."""

    spans: list[SpanRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    other_spans: int = 0  # spans of other instrumentations
    other_records: int = 0  # lines of metrics, logs or profiles (one file exporter may serve every pipeline)
    notes: list[str] = field(default_factory=list)  # what was skipped that is no problem (the app's own output)
    failed: list[str] = field(default_factory=list)  # sources that gave problems and no span

    @property
    def all_failed(self) -> bool:
        """Every source failed: nothing could be read from any of them."""
        return bool(self.sources) and len(self.failed) == len(self.sources)


class _Bad(Exception):
    """A value of the wrong shape; the message names the field, never its content."""


class _Missing(Exception):
    def __init__(self, package: str) -> None:
        super().__init__(package)
        self.package = package


def read(sources: Sequence[str], stdin: IO[bytes] | None = None) -> Reading:
    """Read every source (a path, or ``-`` for ``stdin``) into one ``Reading``."""
    reading = Reading()
    for source in sources:
        name = "<stdin>" if source == STDIN else source
        _tally(name, reading, partial(_read_source, source, name, stdin, reading))
    return reading


def _tally(name: str, reading: Reading, read_it: Callable[[], None]) -> None:
    """Read one source into ``reading``, noting it as failed when it gave problems and no span."""
    reading.sources.append(name)
    spans, problems = len(reading.spans), len(reading.problems)
    read_it()
    if len(reading.problems) > problems and len(reading.spans) == spans:
        reading.failed.append(name)


def _read_source(source: str, name: str, stdin: IO[bytes] | None, reading: Reading) -> None:
    if source == STDIN:
        if stdin is None:
            reading.problems.append(Problem(name, None, "no standard input to read"))
            return
        _read_stream(name, stdin, reading)
        return
    try:
        with open(source, "rb") as stream:
            _read_stream(name, stream, reading)
    except OSError as error:
        reading.problems.append(Problem(name, None, f"cannot read it: {error.strerror or type(error).__name__}"))


def read_text(text: str, source: str = "<text>") -> Reading:
    """Read OTLP/JSON lines from a string (tests, and spans already in memory)."""
    reading = Reading()
    _tally(source, reading, partial(_read_stream, source, io.BytesIO(text.encode()), reading))
    return reading


def _buffered(raw: Any) -> io.BufferedReader:
    """A reader that can peek: the magic bytes tell how the data is compressed."""
    return raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)


class _Other:
    """The lines of one source that are not JSON (the app's own output), and whether some are the console
    exporter's."""

    __slots__ = ("console", "lines")

    def __init__(self) -> None:
        self.lines = 0
        self.console = False

    def see(self, line: bytes) -> None:
        self.lines += 1
        if not self.console and _CONSOLE.match(line):
            self.console = True

    def settle(self, name: str, reading: Reading, problems: int, spans: int) -> None:
        """Named once: the console exporter's output (a problem, instead of every line it made, when nothing else
        was read), or how many lines of other output were skipped (a note)."""
        if self.console and len(reading.spans) == spans:
            del reading.problems[problems:]
            reading.problems.append(Problem(name, None, CONSOLE_HINT))
        elif self.console:
            reading.notes.append(f"{name}: {self.lines} lines of the console exporter's output skipped")
        elif self.lines:
            lines = "1 line that is" if self.lines == 1 else f"{self.lines} lines that are"
            reading.notes.append(f"{name}: {lines} not JSON skipped (the app's own output, beside the spans?)")


def _is_json(line: bytes) -> bool:
    """A line that is JSON, or meant to be: an OTLP object or array (``{`` alone opens the console exporter's
    indented object)."""
    start = line.lstrip()[:1]
    return (start == b"{" and line.strip() != b"{") or start == b"["


def _read_stream(name: str, raw: IO[bytes], reading: Reading) -> None:
    stream = _buffered(raw)
    number = 0
    other = _Other()
    problems, spans = len(reading.problems), len(reading.spans)
    try:
        head = stream.peek(8)[:8]
        if head.startswith(_GZIP_MAGIC):
            stream = _buffered(gzip.GzipFile(fileobj=stream))
            head = stream.peek(8)[:8]
        if head.startswith(_ZSTD_MAGIC):
            stream = _buffered(_zstd_reader(stream))
        elif len(head) == 8 and head[4:8] == _ZSTD_MAGIC:
            for number, record in _framed(stream):
                _parse(name, number, record, True, reading)
            return
        elif any(byte < 9 or 13 < byte < 32 for byte in head):  # control bytes: not text
            reading.problems.append(
                Problem(name, None, "not OTLP/JSON: it starts with binary data (the Collector's `format: proto`?)")
            )
            return
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            if _is_json(line):
                _parse(name, number, line, line.endswith(b"\n"), reading)
            else:
                other.see(line)
    except _Missing as missing:
        reading.problems.append(
            Problem(
                name,
                None,
                f"zstd-compressed: reading it needs Python 3.14 or the `{missing.package}` package "
                f"({install_hint('zstd')})",
                missing.package,
            )
        )
    except (EOFError, OSError, zlib.error, ValueError) as error:  # truncated or corrupt compressed data
        kind = "ends early (truncated)" if isinstance(error, EOFError) else f"is corrupt ({type(error).__name__})"
        reading.problems.append(Problem(name, number + 1, f"the compressed data {kind}"))
    other.settle(name, reading, problems, spans)


def _zstd_module() -> Any:
    for module in ("compression.zstd", ZSTD_PACKAGE):  # the standard library's from Python 3.14
        try:
            return importlib.import_module(module)
        except ImportError:
            continue
    raise _Missing(ZSTD_PACKAGE)


def _zstd_reader(stream: IO[bytes]) -> Any:
    """A raw reader of the decompressed stream, across every frame of it."""
    module = _zstd_module()
    if module.__name__ == ZSTD_PACKAGE:
        return module.ZstdDecompressor().stream_reader(stream, read_across_frames=True, closefd=False)
    return module.ZstdFile(stream)


def _framed(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """Records of an older Collector's zstd file: each a 4-byte big-endian length, then one zstd frame."""
    number = 0
    while True:
        size = stream.read(4)
        if not size:
            return
        number += 1
        if len(size) < 4:
            raise EOFError
        (length,) = struct.unpack(">I", size)
        frame = stream.read(length)
        if len(frame) < length:
            raise EOFError
        yield number, _buffered(_zstd_reader(io.BytesIO(frame))).read()


def _parse(name: str, number: int, line: bytes, complete: bool, reading: Reading) -> None:
    try:
        document = json.loads(line)
    except UnicodeDecodeError:
        reading.problems.append(Problem(name, number, "not UTF-8 text"))
        return
    except json.JSONDecodeError as error:
        if not complete:
            message = "truncated: the file ends inside this line (was it still being written?)"
        else:
            message = f"not JSON ({error.msg} at column {error.colno})"
        reading.problems.append(Problem(name, number, message))
        return
    except RecursionError:
        reading.problems.append(Problem(name, number, "not JSON this reader takes (nested too deeply)"))
        return
    if not isinstance(document, dict):
        reading.problems.append(
            Problem(name, number, f"not an OTLP trace export: a JSON {type(document).__name__}, not an object")
        )
        return
    resources = _get(document, "resourceSpans")
    if resources is None:
        if any(_get(document, key) is not None for key in _OTHER_SIGNALS):
            reading.other_records += 1
            return
        reading.problems.append(Problem(name, number, "not an OTLP trace export: it has no `resourceSpans`"))
        return
    try:
        _resource_spans(resources, reading, name, number)
    except _Bad as bad:
        reading.problems.append(Problem(name, number, str(bad)))


def _resource_spans(resources: object, reading: Reading, name: str, number: int) -> None:
    """Every span of this package in one export; a bad span is a problem of its own, the others are read."""
    for r, resource_spans in enumerate(_list(resources, "resourceSpans")):
        where = f"resourceSpans[{r}]"
        resource = _dict(resource_spans, where)
        service = UNKNOWN_SERVICE
        resource_fields = _get(resource, "resource")
        if resource_fields is not None:
            found = _attributes(_get(_dict(resource_fields, where + ".resource"), "attributes"), where).get(
                "service.name"
            )
            if isinstance(found, str) and found:
                service = found
        scopes = _get(resource, "scopeSpans")
        if scopes is None:
            scopes = _get(resource, "instrumentationLibrarySpans")  # OTLP before 0.15
        for s, scope_spans in enumerate(_list(scopes or [], where + ".scopeSpans")):
            at = f"{where}.scopeSpans[{s}]"
            scope_fields = _dict(scope_spans, at)
            scope = _get(scope_fields, "scope") or _get(scope_fields, "instrumentationLibrary") or {}
            scope_name = _get(_dict(scope, at + ".scope"), "name")
            spans = _list(_get(scope_fields, "spans") or [], at + ".spans")
            if not is_own(scope_name if isinstance(scope_name, str) else None):
                reading.other_spans += len(spans)
                continue
            for n, span in enumerate(spans):
                try:
                    if not isinstance(span, dict):
                        raise _Bad(": not an object")
                    reading.spans.append(_span(span, service, str(scope_name)))
                except _Bad as bad:
                    why = str(bad)
                    sep = "" if why.startswith(":") else "."
                    reading.problems.append(Problem(name, number, f"{at}.spans[{n}]{sep}{why}"))


def _span(span: Mapping[str, Any], service: str, scope: str) -> SpanRecord:
    start = _nanos(_get(span, "startTimeUnixNano"), "startTimeUnixNano")
    end = _nanos(_get(span, "endTimeUnixNano"), "endTimeUnixNano")
    parent = _get(span, "parentSpanId")
    name = _get(span, "name")
    status = _get(span, "status")
    code = _get(status, "code") if isinstance(status, dict) else None
    events = []
    for e, event in enumerate(_list(_get(span, "events") or [], "events")):
        fields = _dict(event, f"events[{e}]")
        event_name = _get(fields, "name")
        events.append(
            EventRecord(
                event_name if isinstance(event_name, str) else "",
                _nanos(_get(fields, "timeUnixNano"), f"events[{e}].timeUnixNano"),
                _attributes(_get(fields, "attributes"), f"events[{e}]"),
            )
        )
    links = []
    for k, link in enumerate(_list(_get(span, "links") or [], "links")):
        fields = _dict(link, f"links[{k}]")
        trace_id = _id(_get(fields, "traceId"), 16, f"links[{k}].traceId")
        links.append((trace_id, _id(_get(fields, "spanId"), 8, f"links[{k}].spanId")))
    return SpanRecord(
        trace_id=_id(_get(span, "traceId"), 16, "traceId"),
        span_id=_id(_get(span, "spanId"), 8, "spanId"),
        name=name if isinstance(name, str) else "",
        start_ns=start,
        end_ns=max(end, start),
        attributes=_attributes(_get(span, "attributes"), ""),
        events=tuple(events),
        links=tuple(links),
        service=service,
        scope=scope,
        parent_span_id=_id(parent, 8, "parentSpanId") if parent else None,
        error=code in _STATUS_ERROR,
    )


_SNAKE: dict[str, str] = {}


def _get(fields: object, key: str) -> Any:
    """A field by its lowerCamelCase name, or the proto field name protobuf's JSON parsers also accept."""
    if not isinstance(fields, dict):
        return None
    value = fields.get(key)
    if value is None:
        snake = _SNAKE.get(key)
        if snake is None:
            snake = _SNAKE[key] = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        value = fields.get(snake)
    return value


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{where}: not an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"{where}: not a list")
    return value


def _nanos(value: object, where: str) -> int:
    """A fixed64 time: a string of digits in protobuf's JSON mapping, a number from some writers; absent is 0."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise _Bad(f"{where}: not a time in nanoseconds")


def _id(value: object, size: int, where: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id in lowercase hex, from hex or (standard or URL-safe) base64."""
    if isinstance(value, str):
        if len(value) == 2 * size and _HEX.fullmatch(value):
            return value.lower()
        text = value.replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
    raise _Bad(f"{where}: not an id of {size} bytes in hex or base64")


def _attributes(value: object, where: str) -> dict[str, Value]:
    if value is None:
        return {}
    out: dict[str, Value] = {}
    where = f"{where}.attributes" if where else "attributes"
    for entry in _list(value, where):
        key = entry.get("key") if type(entry) is dict else None
        if type(key) is not str:
            raise _Bad(f"{where}: an entry without a key")
        out[key] = _any_value(entry.get("value"), 0)
    return out


_STRING, _BOOL, _INT, _DOUBLE, _ARRAY = "s", "b", "i", "d", "a"
_KINDS: Final = {  # lowerCamelCase, and the proto field names protobuf's JSON parsers also accept
    "stringValue": _STRING,
    "boolValue": _BOOL,
    "intValue": _INT,
    "doubleValue": _DOUBLE,
    "arrayValue": _ARRAY,
    "string_value": _STRING,
    "bool_value": _BOOL,
    "int_value": _INT,
    "double_value": _DOUBLE,
    "array_value": _ARRAY,
}
_SPECIAL_DOUBLES: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_INTEGER = re.compile(r"-?\d+")


def _any_value(value: object, depth: int) -> Value:
    """An ``AnyValue`` (one field set); kinds this package never writes (key-value lists, bytes) become short
    descriptions, a value of the wrong type ``None``."""
    if type(value) is not dict or depth > _MAX_DEPTH:
        return None
    found = value.get("stringValue")  # most of them: a look-up, no loop
    if type(found) is str:
        return found
    for name, found in value.items():
        kind = _KINDS.get(name)
        if kind is _STRING:
            return found if isinstance(found, str) else None
        if kind is _BOOL:
            return found if isinstance(found, bool) else None
        if kind is _INT:
            if isinstance(found, int) and not isinstance(found, bool):
                return found
            return int(found) if isinstance(found, str) and _INTEGER.fullmatch(found) else None
        if kind is _DOUBLE:
            if isinstance(found, (int, float)) and not isinstance(found, bool):
                return float(found)
            return _SPECIAL_DOUBLES.get(found) if isinstance(found, str) else None
        if kind is _ARRAY:
            values = found.get("values") if isinstance(found, dict) else None
            return tuple(_any_value(v, depth + 1) for v in values) if isinstance(values, list) else ()
        if name in ("kvlistValue", "kvlist_value"):
            return "(key-value list)"
        if name in ("bytesValue", "bytes_value"):
            return "(bytes)"
    return None
