"""The per-call counters summed in process (otel_responses._telemetry.tally) and reported by asynchronous counters."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.metrics import CallbackOptions

from otel_responses import ResponsesInstrumentor
from otel_responses._telemetry import tally
from otel_responses.emulator import Emulator

from ..conftest import new_captured

MODEL = "gpt-4.1-mini"


def _calls(points: list[object]) -> int:
    return sum(int(getattr(point, "value")) for point in points)  # noqa: B009 - data points are untyped here


def test_calls_keep_counting_across_instrument_cycles_on_one_meter_provider(emulator: Emulator) -> None:
    # The SDK keeps the first asynchronous counter of a name on a meter and ignores a second one's callbacks:
    # a new instrument() on the same provider must add to the tally that counter reads.
    cap = new_captured()
    client = emulator.client()
    for cycle in range(3):
        instrumentor = ResponsesInstrumentor()
        instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
        for _ in range(cycle + 1):
            client.responses.create(model=MODEL, input="hi")
        instrumentor.uninstrument()
        assert _calls(cap.metric_points("openai_responses.calls")) == sum(range(1, cycle + 2))
    client.responses.create(model=MODEL, input="uninstrumented")
    assert _calls(cap.metric_points("openai_responses.calls")) == 6


def test_a_fresh_meter_provider_starts_from_zero(emulator: Emulator) -> None:
    for _ in range(2):
        cap = new_captured()
        instrumentor = ResponsesInstrumentor()
        instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
        emulator.client().responses.create(model=MODEL, input="hi")
        instrumentor.uninstrument()
        assert _calls(cap.metric_points("openai_responses.calls")) == 1


def test_concurrent_adds_are_not_lost() -> None:
    counter = tally.Tally()
    attributes: tally.Attributes = {"k": "v"}

    def add() -> None:
        for _ in range(5000):
            counter.add("series", attributes, 1)

    threads = [threading.Thread(target=add) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    observed = list(counter.observe(CallbackOptions()))
    assert [(o.value, o.attributes) for o in observed] == [(40000, attributes)]


def test_series_beyond_the_limit_fold_into_one_overflow_series(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tally, "MAX_SERIES", 3)
    counter = tally.Tally()
    for number in range(10):
        counter.add(number, {"n": number}, 2)
    counter.add(0, {"n": 0}, 1)  # a known series keeps counting
    observed = {tuple(sorted((o.attributes or {}).items())): o.value for o in counter.observe(CallbackOptions())}
    assert observed == {
        (("n", 0),): 3,
        (("n", 1),): 2,
        (("otel.metric.overflow", True),): 16,
    }
