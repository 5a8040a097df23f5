"""Shared fixtures: one emulator per session, real SDK exporters, the instrumentation on per test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator


@dataclass
class Captured:
    """What the instrumentation exported, read through the real SDK."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def only_span(self) -> ReadableSpan:
        spans = self.spans()
        assert len(spans) == 1, [s.name for s in spans]
        return spans[0]

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        if data is None:
            return points
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


def new_captured() -> Captured:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    return Captured(exporter, reader, tracer_provider, meter_provider)


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture
def captured() -> Iterator[Captured]:
    """The instrumentation on, exporting to in-memory SDK exporters; off again after the test."""
    cap = new_captured()
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        yield cap
    finally:
        instrumentor.uninstrument()
