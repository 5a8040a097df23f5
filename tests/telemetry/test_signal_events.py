"""Signals as the GenAI conventions' log events, read through a real SDK ``LoggerProvider`` and an in-memory log
exporter (the pytest kit's ``capture()``): every signal of the catalogue is exactly one ``gen_ai.evaluation.result``
with its names, severity and metadata, in the context of its call's span; a healthy session makes none; a call that
failed is one ``gen_ai.client.operation.exception`` with the exception's type only.

Every signal is raised by the Signals page's own example for it (tests/project/test_docs.py runs each as a check that it
raises exactly its signal), so a signal added to the catalogue is covered here once its section has one.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry._logs import Logger, LogRecord, SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from otel_responses import ResponsesInstrumentor
from otel_responses._telemetry import events as events_module
from otel_responses.emulator import Emulator
from otel_responses.signals import CATALOGUE, ERROR, INFO, WARNING, ContextLossError
from otel_responses.testing import CapturedTelemetry, capture
from otel_responses.tools.scenarios import SCENARIOS, run

from ..support import attrs

ROOT = Path(__file__).resolve().parents[2]
SIGNALS_PAGE = (ROOT / "docs" / "signals.md").read_text()
EXAMPLE_URL = "http://127.0.0.1:8080/v1"  # the port the pages' examples name (tests/project/test_docs.py)

RESULT = "gen_ai.evaluation.result"
EXCEPTION = "gen_ai.client.operation.exception"
NAME = "gen_ai.evaluation.name"
LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
RESPONSE_ID = "gen_ai.response.id"
SIGNAL_EVENT = "openai_responses.signal"
SIGNAL_NAME = "openai_responses.signal.name"
SIGNAL_SEVERITY = "openai_responses.signal.severity"
ERRORS = "openai_responses.instrumentation.errors"
SEVERITY_NUMBERS = {ERROR: SeverityNumber.ERROR, WARNING: SeverityNumber.WARN, INFO: SeverityNumber.INFO}


def _example(name: str, which: str) -> str:
    """The Signals page's example that raises ``name`` ("raises"), or its near miss ("near miss")."""
    found = re.findall(rf"<!-- {which}: {name} -->\n```python\n(.*?)```", SIGNALS_PAGE, re.S)
    assert len(found) == 1, f"docs/signals.md has no single '{which}' example for {name}"
    return str(found[0])


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def _run_example(code: str, emulator: Emulator) -> CapturedTelemetry:
    client = emulator.client()
    if "responses.compact(" in code and not hasattr(client.responses, "compact"):
        pytest.skip("this openai release has no responses.compact")  # the floor of the supported range
    # Where the API refuses the request, the page's comment names its answer (tests/project/test_docs.py checks which).
    with capture() as telemetry, contextlib.suppress(openai.APIStatusError):
        exec(compile(code.replace(EXAMPLE_URL, emulator.base_url), "docs/signals.md", "exec"), {"client": client})
    client.close()
    return telemetry


def _explanations(name: str) -> set[str]:
    """The meanings and fixes the signal's explanation may give: the catalogue's, each variant's, and, for a fix per
    value of its detail (the reasons reasoning was withheld for), each value's."""
    kind = CATALOGUE[name]
    told = [(kind.meaning, kind.fix), *kind.variants.values()]
    if kind.fixes is not None:
        told += [(kind.meaning, fix) for fix in kind.fixes[1].values()]
    return {f"{meaning}. Fix: {fix}." for meaning, fix in told}


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_signal_is_one_evaluation_result_in_its_calls_span(name: str, emulator: Emulator) -> None:
    telemetry = _run_example(_example(name, "raises"), emulator)
    assert telemetry.signals() == [name]
    (span,) = [s for s in telemetry.spans() if name in attrs(s)["openai_responses.signals"]]
    results = telemetry.events(RESULT)
    assert [r.attributes[NAME] for r in results] == [name]  # type: ignore[index]
    (record,) = results
    severity = CATALOGUE[name].severity
    record_attrs = dict(record.attributes or {})
    assert record_attrs[LABEL] == severity
    assert record_attrs[EXPLANATION] in _explanations(name)
    assert record.severity_number == SEVERITY_NUMBERS[severity]
    assert (record.trace_id, record.span_id) == (span.context.trace_id, span.context.span_id)
    span_attrs = attrs(span)
    if RESPONSE_ID in span_attrs:
        assert record_attrs[RESPONSE_ID] == span_attrs[RESPONSE_ID]
    else:
        assert RESPONSE_ID not in record_attrs
    (event,) = [e for e in span.events if e.name == SIGNAL_EVENT]
    detail = {k: v for k, v in dict(event.attributes or {}).items() if k not in (SIGNAL_NAME, SIGNAL_SEVERITY)}
    assert {k: v for k, v in record_attrs.items() if k not in (NAME, LABEL, EXPLANATION, RESPONSE_ID)} == detail


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_near_miss_is_no_event(name: str, emulator: Emulator) -> None:
    telemetry = _run_example(_example(name, "near miss"), emulator)
    assert telemetry.signals() == []
    assert telemetry.events() == []


def test_a_healthy_session_in_each_state_mode_makes_no_event(emulator: Emulator) -> None:
    healthy = [s for s in SCENARIOS if s.mistake is None and not s.raises]
    assert {s.mode for s in healthy} == {"server_chain", "conversation", "client_replay"}
    for scenario in healthy:
        client = emulator.client()
        with capture() as telemetry:
            transcript = run(client, scenario, "MK-healthy")
        client.close()
        assert transcript.error is None, scenario.name
        assert len(telemetry.chat_spans()) >= 3, scenario.name
        assert (telemetry.signals(), telemetry.events()) == ([], []), scenario.name


def test_an_api_error_is_one_exception_event_with_its_type_only(emulator: Emulator) -> None:
    client = emulator.client()
    with capture() as telemetry, pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_never_made")
    client.close()
    (span,) = telemetry.spans()
    (record,) = telemetry.events()
    assert record.event_name == EXCEPTION
    assert dict(record.attributes or {}) == {"exception.type": "openai.NotFoundError"}  # no message, no stacktrace
    assert (record.severity_number, record.severity_text) == (SeverityNumber.WARN, "WARN")
    assert record.body is None
    assert (record.trace_id, record.span_id) == (span.context.trace_id, span.context.span_id)


def test_a_refused_request_is_its_signal_and_one_exception(emulator: Emulator) -> None:
    """The API refuses both state fields together: the signal's result and the failure's exception, one each."""
    client = emulator.client()
    conversation = client.conversations.create()
    first = client.responses.create(model="gpt-5-mini", input="The marker is M-7.")
    with capture() as telemetry, pytest.raises(openai.BadRequestError):
        client.responses.create(
            model="gpt-5-mini", input="Again.", conversation=conversation.id, previous_response_id=first.id
        )
    client.close()
    assert [(r.event_name, dict(r.attributes or {}).get(NAME)) for r in telemetry.events()] == [
        (RESULT, "state_mode_conflict"),
        (EXCEPTION, None),
    ]
    assert dict(telemetry.events(EXCEPTION)[0].attributes or {}) == {"exception.type": "openai.BadRequestError"}


def test_a_refusal_by_strict_mode_is_an_exception_of_its_own_class(emulator: Emulator) -> None:
    client = emulator.client()
    with capture(strict=True) as telemetry, pytest.raises(ContextLossError) as refused:
        client.responses.create(
            model="gpt-5-mini", input=[{"type": "function_call_output", "call_id": "call_none", "output": "42"}]
        )
    client.close()
    assert refused.value.signals == ("orphan_tool_output",)
    assert [dict(r.attributes or {}).get("exception.type") for r in telemetry.events(EXCEPTION)] == [
        "otel_responses.signals.ContextLossError"
    ]
    assert [dict(r.attributes or {})[NAME] for r in telemetry.events(RESULT)] == ["orphan_tool_output"]


def test_a_failed_stream_is_one_exception_event_with_the_servers_code(emulator: Emulator) -> None:
    """The SDK yields `response.failed` rather than raising: the event's type is the code `error.type` holds."""
    client = emulator.client()
    with capture() as telemetry:
        stream = client.responses.create(model="gpt-5-mini", input="Please trigger failure now.", stream=True)
        with stream:
            kinds = [event.type for event in stream]
    client.close()
    assert kinds[-1] == "response.failed"
    (span,) = telemetry.spans()
    assert attrs(span)["error.type"] == "server_error"
    (record,) = telemetry.events()
    assert (record.event_name, dict(record.attributes or {})) == (EXCEPTION, {"exception.type": "server_error"})
    assert record.severity_number == SeverityNumber.WARN
    assert (record.trace_id, record.span_id) == (span.context.trace_id, span.context.span_id)


def test_events_off_emit_nothing(emulator: Emulator) -> None:
    client = emulator.client()
    with capture(genai_events=False) as telemetry:
        first = client.responses.create(model="gpt-5-mini", instructions="Be brief.", input="The marker is M-2.")
        client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="What is the marker?")
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve("resp_never_made")
    client.close()
    assert telemetry.signals() == ["instructions_dropped"]
    assert telemetry.events() == []


def _dropped_instructions(client: openai.OpenAI) -> None:
    first = client.responses.create(model="gpt-5-mini", instructions="Be brief.", input="The marker is M-3.")
    client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="What is the marker?")


def test_a_span_sampled_out_still_has_its_event_with_its_ids(emulator: Emulator) -> None:
    """Signals are heard when traces are sampled out: the record carries the (unsampled) span's ids."""
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = emulator.client()
    try:
        _dropped_instructions(client)
    finally:
        instrumentor.uninstrument()
        client.close()
    assert spans.get_finished_spans() == ()
    (finished,) = exporter.get_finished_logs()
    record = finished.log_record
    assert dict(record.attributes or {})[NAME] == "instructions_dropped"
    assert record.trace_id != 0
    assert record.span_id != 0
    assert not record.trace_flags.sampled


def test_without_a_logger_provider_no_record_is_built(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenTelemetry API's default logger answers `enabled()` false: a call raising a signal builds no record
    (counted at the one place records are made). With a provider, the same calls build one."""
    built: list[Any] = []
    real = LogRecord

    def counted(**fields: Any) -> Any:
        built.append(fields["event_name"])
        return real(**fields)

    monkeypatch.setattr(events_module, "LogRecord", counted)
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    client = emulator.client()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)  # no logger provider: the API's proxy of a no-op one
    try:
        _dropped_instructions(client)
    finally:
        instrumentor.uninstrument()
    assert [attrs(s)["openai_responses.signals"] for s in spans.get_finished_spans()] == [(), ("instructions_dropped",)]
    if hasattr(Logger, "enabled"):  # OpenTelemetry API 1.41 and later
        assert built == []
    with capture() as telemetry:
        _dropped_instructions(client)
    client.close()
    assert built[-1:] == [RESULT]
    assert len(telemetry.events(RESULT)) == 1


class _Refusing(Logger):
    """A logger whose every call fails, as a broken logging backend might."""

    def emit(self, record: Any = None, **fields: Any) -> None:
        raise RuntimeError("the backend is down")

    def enabled(self, **fields: Any) -> bool:
        return True


class _RefusingProvider:
    def get_logger(self, *args: Any, **kwargs: Any) -> Logger:
        return _Refusing("refusing")


def test_a_failing_logger_costs_the_app_nothing(emulator: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """The events' failure is swallowed and counted; the span still ends with its signal; the app's result stands."""
    cap = CapturedTelemetry.new()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(
        tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider, logger_provider=_RefusingProvider()
    )
    client = emulator.client()
    try:
        with caplog.at_level(logging.DEBUG, logger="otel_responses"):
            first = client.responses.create(model="gpt-5-mini", instructions="Be brief.", input="The marker is M-9.")
            again = client.responses.create(model="gpt-5-mini", previous_response_id=first.id, input="The marker?")
    finally:
        instrumentor.uninstrument()
        client.close()
    assert again.output_text == "marker=M-9"
    assert cap.signals() == ["instructions_dropped"]
    steps = [p.attributes["openai_responses.instrumentation.step"] for p in cap.metric_points(ERRORS)]
    assert steps == ["emit_events"]
    assert "emit_events failed (RuntimeError at test_signal_events.py:" in caplog.text
    assert "the backend is down" not in caplog.text  # the message is never logged: it may echo payload
