"""Telemetry from a call, tested with a plain :class:`~otel_responses._calls.call.Call` and the real OpenTelemetry
SDK: no client, no server. What a call's span and metrics carry is read from the call and its outcome alone; metrics are
recorded in the context of the call's own span (their exemplars lead to it, not to the app's span); a span that
is not recording gets nothing more built, while the metrics, the signals and the ledger work as for any call.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler

from otel_responses._analysis.facts import response_facts
from otel_responses._calls.call import Call
from otel_responses._calls.operations import OPERATIONS
from otel_responses._calls.runtime import Runtime
from otel_responses._telemetry import spans as span_side
from otel_responses._telemetry.recorded import Outcome, Server
from otel_responses._telemetry.telemetry import Telemetry
from otel_responses.config import settings_from
from otel_responses.ledger import InMemoryLedger

ENDPOINT = (Server("api.example.test", 443), "openai")


class Harness:
    """A Telemetry on SDK providers of its own, and plain calls through it."""

    def __init__(self, sampler: Sampler = ALWAYS_ON) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(sampler=sampler)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.ledger = InMemoryLedger()
        self.settings = settings_from({"hash_key": "telemetry-tests", "ledger": self.ledger})
        tracer, meter = self.tracer_provider.get_tracer("t"), self.meter_provider.get_meter("t")
        self.telemetry = Telemetry(tracer, meter, self.settings)
        self.runtime = Runtime(self.settings, self.telemetry)

    def call(self, **kwargs: Any) -> Call:
        call = Call.begin(self.runtime, OPERATIONS["chat"], (), {"model": "gpt-test", **kwargs}, ENDPOINT)
        assert call is not None
        return call

    def points(self, name: str) -> list[Any]:
        return self.collect().get(name, [])

    def collect(self) -> dict[str, list[Any]]:
        """Every metric's points, from one collection (exemplars are those of the interval it ends)."""
        data = self.reader.get_metrics_data()
        assert data is not None
        points: dict[str, list[Any]] = {}
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points


def answer(response_id: str, text: str = "ok") -> Any:
    """A response as the SDK parses it, read as any object of that shape."""
    message = SimpleNamespace(
        type="message",
        id=f"msg_{response_id}",
        role="assistant",
        content=[SimpleNamespace(type="output_text", text=text)],
    )
    usage = SimpleNamespace(input_tokens=12, output_tokens=3, input_tokens_details=None, output_tokens_details=None)
    return SimpleNamespace(id=response_id, model="gpt-test-2025", status="completed", output=[message], usage=usage)


@pytest.fixture
def harness() -> Iterator[Harness]:
    made = Harness()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()


def test_a_call_ends_as_one_span_with_its_request_and_response_sides(harness: Harness) -> None:
    call = harness.call(input="hi", instructions="be brief")
    call.end(Outcome(response_facts(answer("resp_1"), harness.settings)))
    (span,) = harness.exporter.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert span.name == "chat gpt-test"
    assert span.kind is trace.SpanKind.CLIENT
    assert {
        k: attrs[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name", "server.address", "server.port")
    } == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "server.address": "api.example.test",
        "server.port": 443,
    }
    assert attrs["openai_responses.state.mode"] == "single_turn"
    assert attrs["gen_ai.response.id"] == "resp_1"
    assert attrs["gen_ai.response.model"] == "gpt-test-2025"
    assert attrs["openai_responses.output.item_types"] == ("message",)
    assert attrs["openai_responses.signals"] == ()
    assert attrs["openai_responses.context_loss"] is False
    assert attrs["openai_responses.turn"] == 1
    assert attrs["openai_responses.lineage.id"] == "resp_1"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (12, 3)
    assert span.status.status_code is trace.StatusCode.UNSET
    (duration,) = harness.points("gen_ai.client.operation.duration")
    assert duration.count == 1
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test-2025",
        "server.address": "api.example.test",
        "server.port": 443,
    }
    assert harness.ledger.get("resp_1") is not None


def test_an_exception_ends_the_span_with_its_class_and_no_response_side(harness: Harness) -> None:
    class Refused(Exception):
        status_code = 400
        code = "previous_response_not_found"

    harness.call(input="hi", previous_response_id="resp_gone").raised(Refused("what the API said, payload and all"))
    (span,) = harness.exporter.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "test_an_exception_ends_the_span_with_its_class_and_no_response_side.<locals>.Refused"
    assert (attrs["http.response.status_code"], attrs["openai_responses.error.code"]) == (
        400,
        "previous_response_not_found",
    )
    assert "gen_ai.response.id" not in attrs
    assert span.status.status_code is trace.StatusCode.ERROR
    assert "payload" not in str(span.status.description)
    (duration,) = harness.points("gen_ai.client.operation.duration")
    assert dict(duration.attributes)["error.type"] == "_OTHER"  # not a code-like value: the metric keeps it bounded


def test_metrics_are_recorded_in_the_context_of_the_calls_own_span(harness: Harness) -> None:
    """The app has a span of its own open around the call: the call's measurements carry the call's span (their
    exemplars lead to it), not the app's."""
    app_tracer = harness.tracer_provider.get_tracer("app")
    with app_tracer.start_as_current_span("handle request") as app_span:
        first = harness.call(input="Remember: M-1.", instructions="be brief")
        first.end(Outcome(response_facts(answer("resp_1"), harness.settings)))
        second = harness.call(input="And?", previous_response_id="resp_1")  # instructions dropped: a signal
        second.end(Outcome(response_facts(answer("resp_2"), harness.settings)))
    ours = [s for s in harness.exporter.get_finished_spans() if s.name == "chat gpt-test"]
    assert [dict(s.attributes or {})["openai_responses.signals"] for s in ours] == [(), ("instructions_dropped",)]
    own = {s.context.span_id for s in ours}
    app = app_span.get_span_context().span_id
    collected = harness.collect()
    (signal,) = collected["openai_responses.signals"]
    assert [e.span_id for e in signal.exemplars] == [ours[1].context.span_id]
    durations = collected["gen_ai.client.operation.duration"]
    exemplars = [e.span_id for point in durations for e in point.exemplars]
    assert exemplars
    assert set(exemplars) <= own
    assert app not in exemplars


def test_a_span_that_does_not_record_gets_nothing_more_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampled out: the response side of the span is never built; the signals are counted, the calls too, and the
    ledger remembers the response, so the next turn is checked as ever."""
    harness = Harness(sampler=ALWAYS_OFF)
    built: list[str] = []
    real = span_side.finish

    def counted(*args: Any, **kwargs: Any) -> None:
        built.append("finish")
        real(*args, **kwargs)

    monkeypatch.setattr(span_side, "finish", counted)
    first = harness.call(input="Remember: M-1.", instructions="be brief")
    assert not first.span.is_recording()
    first.end(Outcome(response_facts(answer("resp_1"), harness.settings)))
    second = harness.call(input="And?", previous_response_id="resp_1")
    assert [s.name for s in second.signals] == ["instructions_dropped"]
    second.end(Outcome(response_facts(answer("resp_2"), harness.settings)))
    assert built == []
    assert harness.exporter.get_finished_spans() == ()
    (signal,) = harness.points("openai_responses.signals")
    assert (dict(signal.attributes)["openai_responses.signal.name"], signal.value) == ("instructions_dropped", 1)
    assert sum(p.value for p in harness.points("openai_responses.calls")) == 2
    assert harness.ledger.get("resp_2") is not None
