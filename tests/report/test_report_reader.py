"""Reading OTLP/JSON trace files into span records: what the OTLP/JSON exporters write, protobuf's own JSON mapping
(base64 ids, enum names, proto field names), a Collector's lines with other instrumentations and services, gzip and
zstd, and bad input named by file and line. Every span comes from the real instrumentation over the real client."""

from __future__ import annotations

import gzip
import io
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_responses.testing import capture
from otel_responses.tools import scenarios
from otel_responses.tools.report import from_sdk
from otel_responses.tools.report.otlp_json import CONSOLE_HINT, Problem, read, read_text
from otel_responses.tools.report.records import is_own
from otel_responses.version import install_hint

from ..otlp_lines import to_json_line, write_lines
from ..support import run_python

SCENARIO = "replay_tool_pair_broken"  # four calls: reasoning, a tool call, a refused replay with two signals


@pytest.fixture(scope="module")
def spans(emulator: Any) -> list[ReadableSpan]:
    """A scripted session's spans (real client, emulator, SDK), one of them linked, failed, with signal events."""
    client = emulator.client()
    try:
        with capture() as telemetry:
            scenarios.run(client, scenarios.BY_NAME[SCENARIO], "MK-reader")
        return telemetry.spans()
    finally:
        client.close()


def _exported(spans: list[ReadableSpan], path: Path) -> Path:
    return write_lines(spans, path)  # one line per span, as a SimpleSpanProcessor exports them


def test_otlp_json_lines_read_back_as_the_sdk_had_them(spans: list[ReadableSpan], tmp_path: Path) -> None:
    path = _exported(spans, tmp_path / "traces.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == len(spans)
    first = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(first["traceId"]) == 32
    assert len(first["spanId"]) == 16
    assert int(first["traceId"], 16) == spans[0].context.trace_id  # hex, as the OTLP/JSON encoding has it
    reading = read([str(path)])
    assert reading.problems == []
    assert reading.other_spans == 0
    assert reading.spans == list(from_sdk(spans))
    assert [r.links for r in reading.spans][1:] != [()] * (len(spans) - 1)  # the turns link
    assert any(r.error for r in reading.spans)
    assert [len(r.events) for r in reading.spans] == [len(s.events) for s in spans]


@pytest.mark.parametrize("field_names", ["lowerCamelCase", "proto"])
def test_protobufs_own_json_mapping_reads_the_same(spans: list[ReadableSpan], field_names: str) -> None:
    """protobuf's JSON mapping: ids in base64, enums by name; with proto field names (snake_case) too."""
    document = json_format.MessageToDict(encode_spans(spans), preserving_proto_field_name=field_names == "proto")
    span = document["resourceSpans" if field_names != "proto" else "resource_spans"][0]
    span = span["scopeSpans" if field_names != "proto" else "scope_spans"][0]["spans"][0]
    trace_id = span["traceId" if field_names != "proto" else "trace_id"]
    assert len(trace_id) == 24  # base64 of 16 bytes
    assert span["kind"] == "SPAN_KIND_CLIENT"
    reading = read_text(json.dumps(document) + "\n")
    assert reading.problems == []
    assert reading.spans == list(from_sdk(spans))


def test_only_this_packages_spans_are_read_from_a_collectors_file(spans: list[ReadableSpan], tmp_path: Path) -> None:
    """A Collector's file holds every instrumentation of every service, and metrics too."""
    other = _other_spans()
    lines = [to_json_line(spans[:2]), to_json_line(other), to_json_line(spans[2:]), json.dumps({"resourceMetrics": []})]
    reading = read_text("\n".join(lines) + "\n")
    assert reading.problems == []
    assert reading.spans == list(from_sdk(spans))
    assert reading.other_spans == len(other) == 2
    assert reading.other_records == 1
    default = spans[0].resource.attributes["service.name"]  # the SDK's default
    assert {r.service for r in reading.spans} == {default}
    # Spans of several services: the service comes from each resource.
    relabelled = [_with_service(s, "checkout") for s in spans]
    reading = read_text(to_json_line(relabelled) + "\n" + to_json_line(spans[:1]) + "\n")
    assert [r.service for r in reading.spans] == ["checkout"] * len(spans) + [default]


def _other_spans() -> list[ReadableSpan]:
    """Two spans of another instrumentation (the app's own tracer), on a service of its own."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "web"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my.app")
    with tracer.start_as_current_span("handle request"), tracer.start_as_current_span("render"):
        pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _with_service(span: ReadableSpan, service: str) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=Resource.create({"service.name": service}),
        attributes=span.attributes,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def test_the_instrumentations_own_scope_is_recognised(spans: list[ReadableSpan]) -> None:
    assert {is_own(s.instrumentation_scope.name) for s in spans} == {True}  # type: ignore[union-attr]
    assert [is_own(name) for name in ("otel_responses", "otel_responses.x.y", "otel_responsesX", "my.app", None)] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_gzip_and_zstd_files(spans: list[ReadableSpan], tmp_path: Path) -> None:
    text = "".join(to_json_line([s]) + "\n" for s in spans)
    expected = list(from_sdk(spans))
    files = {
        "traces.jsonl.gz": gzip.compress(text.encode()) + gzip.compress(b""),  # two members, as `cat a.gz b.gz`
        # The Collector's compression: zstd, one stream of lines, several frames without a content size.
        "traces.jsonl.zst": b"".join(_zstd_frame(part.encode()) for part in (text[:500], text[500:])),
        # An older Collector's: each object a frame of its own behind its length (4 bytes, big-endian).
        "framed.zst": b"".join(
            struct.pack(">I", len(frame)) + frame for frame in (_zstd_frame(to_json_line([s]).encode()) for s in spans)
        ),
    }
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        reading = read([str(path)])
        assert reading.problems == [], name
        assert reading.spans == expected, name


def _zstd_frame(data: bytes) -> bytes:
    """A frame as a streaming encoder writes it: no content size in its header."""
    out = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(out, closefd=False) as writer:
        writer.write(data)
    return out.getvalue()


def test_without_a_zstd_reader_a_zstd_file_is_a_problem_naming_the_package(
    spans: list[ReadableSpan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zstd = tmp_path / "traces.jsonl.zst"
    zstd.write_bytes(_zstd_frame(to_json_line(spans).encode()))
    plain = _exported(spans, tmp_path / "plain.jsonl")
    for module in ("zstandard", "compression.zstd"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed (nor Python 3.14)
    reading = read([str(zstd), str(plain)])
    assert reading.problems == [
        Problem(
            str(zstd),
            None,
            f"zstd-compressed: reading it needs Python 3.14 or the `zstandard` package ({install_hint('zstd')})",
            "zstandard",
        )
    ]
    assert reading.spans == list(from_sdk(spans))  # the other input is still read


def test_bad_lines_are_named_by_file_and_line_and_the_rest_is_read(spans: list[ReadableSpan], tmp_path: Path) -> None:
    secret = "sk-proj-NEVER-IN-A-MESSAGE"
    good = json.loads(to_json_line(spans[:2]))
    bad_id = json.loads(to_json_line(spans[2:]))
    bad_id["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = secret
    lines = [
        json.dumps(good),
        f'{{"resourceSpans": [{secret}]}}',
        json.dumps([secret]),
        json.dumps({"resource": secret}),
        json.dumps({"resourceLogs": [secret]}),
        json.dumps(bad_id),
        json.dumps({"resourceSpans": [{"scopeSpans": {"spans": secret}}]}),
        json.dumps(good)[:50],  # the last line, cut: the file is still being written
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines))
    reading = read([str(path), str(tmp_path / "missing.jsonl"), str(tmp_path)])
    name = str(path)
    assert [str(p) for p in reading.problems] == [
        f"{name}:2: not JSON (Expecting value at column 20)",
        f"{name}:3: not an OTLP trace export: a JSON list, not an object",
        f"{name}:4: not an OTLP trace export: it has no `resourceSpans`",
        f"{name}:6: resourceSpans[0].scopeSpans[0].spans[0].traceId: not an id of 16 bytes in hex or base64",
        f"{name}:7: resourceSpans[0].scopeSpans: not a list",
        f"{name}:8: truncated: the file ends inside this line (was it still being written?)",
        f"{tmp_path / 'missing.jsonl'}: cannot read it: No such file or directory",
        f"{tmp_path}: cannot read it: Is a directory",
    ]
    assert not [p for p in reading.problems if secret in str(p)]  # a problem never quotes the file
    records = list(from_sdk(spans))
    assert reading.spans == records[:2] + records[3:]  # the other spans of line 6 are read
    assert reading.other_records == 1


def test_binary_and_truncated_compressed_input(spans: list[ReadableSpan], tmp_path: Path) -> None:
    proto = tmp_path / "traces.binpb"
    data = encode_spans(spans).SerializeToString()
    proto.write_bytes(struct.pack(">I", len(data)) + data)  # the Collector's `format: proto`
    text = "".join(to_json_line([s]) + "\n" for s in spans)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(text.encode())[:-40])
    reading = read([str(proto), str(cut)])
    assert [str(p) for p in reading.problems] == [
        f"{proto}: not OTLP/JSON: it starts with binary data (the Collector's `format: proto`?)",
        f"{cut}:{len(spans)}: the compressed data ends early (truncated)",
    ]
    assert reading.spans == list(from_sdk(spans))[: len(spans) - 1]


def test_standard_input(spans: list[ReadableSpan]) -> None:
    stdin = io.BytesIO(gzip.compress(to_json_line(spans).encode() + b"\n"))
    reading = read(["-"], stdin)
    assert reading.sources == ["<stdin>"]
    assert reading.problems == []
    assert reading.spans == list(from_sdk(spans))


def test_the_kit_and_the_reader_load_no_protobuf() -> None:
    """The pytest plugin is imported by every pytest run, the reader by the command: neither needs protobuf."""
    code = (
        "import sys\nimport otel_responses.testing, otel_responses.tools.report, otel_responses.tools.report.command\n"
        "from otel_responses.tools.report.otlp_json import read_text\nfrom otel_responses.tools.report import render\n"
        "render(read_text('').spans)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('google.protobuf', 'opentelemetry.proto', "
        "'opentelemetry.exporter', 'opentelemetry.sdk', 'openai'))))"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- the spans beside the app's own output (standard output) ------------------------------------------------------


def _console(spans: list[ReadableSpan]) -> str:
    """What the SDK's ConsoleSpanExporter prints for ``spans``: one indented JSON object per span."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    out = io.StringIO()
    ConsoleSpanExporter(out=out).export(spans)
    return out.getvalue()


def test_the_apps_own_output_among_the_spans_is_named_once_and_no_problem(spans: list[ReadableSpan]) -> None:
    """Standard output of an app run with the spans written there: its prints between the OTLP/JSON lines."""
    stream = io.StringIO()
    stream.write("Starting up...\n")
    stream.write(to_json_line(spans[:2]) + "\n")
    stream.write("marker=M-1\n\n  indented: not JSON either\n")
    stream.write(to_json_line(spans[2:]) + "\n")
    stream.write("Done.")
    reading = read_text(stream.getvalue(), "run.jsonl")
    assert reading.problems == []
    assert reading.spans == list(from_sdk(spans))
    assert reading.notes == ["run.jsonl: 4 lines that are not JSON skipped (the app's own output, beside the spans?)"]
    assert reading.failed == []
    # Its near miss: a line that opens JSON and breaks is a problem, as in a Collector's file.
    broken = read_text(stream.getvalue() + '\n{"resourceSpans": [', "run.jsonl")
    assert [str(p) for p in broken.problems] == [
        "run.jsonl:8: truncated: the file ends inside this line (was it still being written?)"
    ]
    assert broken.spans == reading.spans


def test_the_console_exporters_output_is_one_problem_saying_how_to_write_otlp_json(spans: list[ReadableSpan]) -> None:
    text = "marker=M-1\n" + _console(spans)
    reading = read_text(text, "console.txt")
    assert [str(p) for p in reading.problems] == [f"console.txt: {CONSOLE_HINT}"]
    assert "opentelemetry-exporter-otlp-json-file" in CONSOLE_HINT
    assert (reading.spans, reading.notes, reading.failed, reading.all_failed) == ([], [], ["console.txt"], True)
    # Beside OTLP/JSON lines (two exporters on one output), a note: the spans are read.
    mixed = read_text(text + to_json_line(spans) + "\n", "both.txt")
    assert mixed.problems == []
    assert mixed.spans == list(from_sdk(spans))
    lines = len(text.strip().splitlines())
    assert mixed.notes == [f"both.txt: {lines} lines of the console exporter's output skipped"]


def test_a_source_fails_when_it_gives_problems_and_no_span(spans: list[ReadableSpan], tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(to_json_line(spans) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": 7}\n')
    reading = read([str(good), str(bad), str(tmp_path / "missing.jsonl")])
    assert (reading.failed, reading.all_failed) == ([str(bad), str(tmp_path / "missing.jsonl")], False)
    assert read([str(bad)]).all_failed
    half = tmp_path / "half.jsonl"
    half.write_text('{"resourceSpans": 7}\n' + to_json_line(spans) + "\n")  # a problem, and spans: not failed
    assert read([str(half)]).failed == []
