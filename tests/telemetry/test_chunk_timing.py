"""Chunk timing of streams (``chunk_timing=True``): one point of the time per output chunk for each chunk after the
first, with the attributes and buckets the conventions give the time to first chunk, sync, async and through the
``responses.stream()`` helper; off by default and never for plain calls; set from the environment too."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from otel_responses import ConfigError
from otel_responses.config import ENV_PREFIX, settings_from
from otel_responses.emulator import Emulator
from otel_responses.testing import CapturedTelemetry, capture

REASONING_MODEL = "o4-mini"
MODEL = "gpt-4.1-mini"
CHUNK_METRIC = "gen_ai.client.operation.time_per_output_chunk"
TTFC = "gen_ai.client.operation.time_to_first_chunk"


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- chunk timing ------------------------------------------------------------------------------------------------


def _chunk_points(telemetry: CapturedTelemetry) -> list[Any]:
    return telemetry.metric_points(CHUNK_METRIC)


def test_chunk_timing_records_one_point_per_chunk_after_the_first(emulator: Emulator) -> None:
    client = emulator.client()
    with capture(chunk_timing=True) as telemetry:
        events = list(client.responses.create(model=REASONING_MODEL, input="Stream it.", stream=True))
        with client.responses.stream(model=MODEL, input="And this one.") as stream:
            helper_events = list(stream)
        points = {dict(p.attributes)["gen_ai.request.model"]: p for p in _chunk_points(telemetry)}
        assert points[REASONING_MODEL].count == len(events) - 1
        assert points[MODEL].count == len(helper_events) - 1  # responses.stream(): the same stream, one span
        assert len(events) > 3
        assert len(helper_events) > 3
        # The attributes of the time to first chunk, as the conventions define both; their advised buckets.
        first = {dict(p.attributes)["gen_ai.request.model"]: p for p in telemetry.metric_points(TTFC)}
        spans = {attrs(s)["gen_ai.request.model"]: s for s in telemetry.chat_spans()}
        for model, point in points.items():
            assert dict(point.attributes) == dict(first[model].attributes)
            assert list(point.explicit_bounds) == [0.01 * 2**i for i in range(14)]
            assert 0 <= point.min <= point.max
            span = spans[model]
            assert span.end_time is not None
            assert span.start_time is not None
            assert point.sum <= (span.end_time - span.start_time) / 1e9


def test_chunk_timing_of_an_async_stream(emulator: Emulator) -> None:
    async def run() -> int:
        client = emulator.async_client()
        try:
            stream = await client.responses.create(model=MODEL, input="Async.", stream=True)
            return len([event async for event in stream])
        finally:
            await client.close()

    with capture(chunk_timing=True) as telemetry:
        count = asyncio.run(run())
        (point,) = _chunk_points(telemetry)
        assert point.count == count - 1


def test_chunk_timing_is_off_by_default_and_never_for_plain_calls(emulator: Emulator) -> None:
    client = emulator.client()
    with capture() as telemetry:
        list(client.responses.create(model=MODEL, input="Stream.", stream=True))
        assert _chunk_points(telemetry) == []
    with capture(chunk_timing=True) as telemetry:
        client.responses.create(model=MODEL, input="Not streamed.")
        assert _chunk_points(telemetry) == []


def test_chunk_timing_from_the_environment() -> None:
    assert settings_from({}, {ENV_PREFIX + "CHUNK_TIMING": "true"}).chunk_timing is True
    assert settings_from({}, {}).chunk_timing is False
    assert settings_from({"chunk_timing": False}, {ENV_PREFIX + "CHUNK_TIMING": "true"}).chunk_timing is False
    with pytest.raises(ConfigError, match="chunk_timing must be True or False"):
        settings_from({"chunk_timing": "yes"}, {})
