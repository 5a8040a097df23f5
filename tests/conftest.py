"""Shared fixtures: one emulator per session, real SDK exporters, the instrumentation on per test."""

from __future__ import annotations

import logging
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

    def chat_spans(self) -> list[ReadableSpan]:
        """Spans of create/parse calls only (conversations.create and the like make spans of their own)."""
        return [s for s in self.spans() if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]

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


class _EndedSpanWarnings(logging.Handler):
    """Collects the SDK's complaints about a span ended twice or written after its end."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "ended span" in message:
            self.messages.append(message)


@pytest.fixture(autouse=True)
def no_span_used_after_its_end() -> Iterator[None]:
    """Every test: no span is ended twice nor written to after it ended."""
    handler = _EndedSpanWarnings()
    logger = logging.getLogger("opentelemetry.sdk.trace")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert handler.messages == []


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
