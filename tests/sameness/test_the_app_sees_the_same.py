"""The app sees the same with the instrumentation on as off: its call reaches the SDK as it made it and leaves nothing
behind, whatever the instrumentation cannot read or start (a one-shot input list or a generator, extra headers whose
``get`` raises, an argument the SDK rejects, ``suppress_instrumentation()``, a span processor raising when a span
starts); the raw and streaming variants return what they return bare; an internal failure is swallowed, counted and
logged without payload. Through the real client and the emulator.

Its siblings hold the same promise against other inputs, each with a harness of its own: a faulty server
(``test_faults.py``, an in-process transport) and hostile peers (``test_adversarial.py``, scripted servers and
Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import openai
import pytest
from opentelemetry import context as otel_context
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import Span, SpanProcessor

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator

from ..conftest import Captured, new_captured
from ..support import chat_attrs

MODEL = "gpt-4.1-mini"


# -- the app's arguments ---------------------------------------------------------------------------------------------


class OneShotList(list[Any]):
    """Iterates once: the second pass yields nothing (a lazily drained queue, say)."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.passes = 0

    def __iter__(self) -> Iterator[Any]:
        self.passes += 1
        return super().__iter__() if self.passes == 1 else iter(())


def test_a_one_shot_list_reaches_the_sdk_whole(emulator: Emulator, client: openai.OpenAI, captured: Any) -> None:
    emulator.requests.clear()
    items = OneShotList([{"role": "user", "content": "first"}, {"role": "user", "content": "second"}])
    client.responses.create(model=MODEL, input=items)
    (sent,) = [r.body for r in emulator.requests if r.path.endswith("/responses")]
    assert len(sent["input"]) == 2, "the instrumentation used up the app's one-shot list"
    (attrs,) = chat_attrs(captured)
    assert attrs["openai_responses.input.item_count"] == 2  # and it still read the items


class RaisingGetHeaders(Mapping[str, str]):
    """A headers mapping whose ``get`` raises: the SDK merges it with ``**``, never calls ``get``."""

    def __getitem__(self, key: str) -> str:
        return {"X-App": "1"}[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["X-App"])

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("the app's mapping refuses get()")


def test_extra_headers_whose_get_raises_do_not_reach_the_app(
    emulator: Emulator, client: openai.OpenAI, captured: Any
) -> None:
    emulator.requests.clear()
    response = client.responses.create(model=MODEL, input="hi", extra_headers=RaisingGetHeaders())
    assert response.status == "completed"
    assert len([r for r in emulator.requests if r.path.endswith("/responses")]) == 1
    assert len(captured.chat_spans()) == 1  # still recorded: an unreadable mapping means a plain call


def test_the_paginator_leaves_no_context_when_the_sdk_rejects_an_argument(emulator: Emulator, captured: Any) -> None:
    async def run() -> None:
        client = emulator.async_client()
        before = otel_context.get_current()
        with pytest.raises(TypeError):
            client.responses.input_items.list("resp_x", no_such_argument=1)  # type: ignore[call-arg]
        assert otel_context.get_current() == before
        await client.close()

    asyncio.run(run())
    (span,) = captured.spans()
    assert span.end_time is not None
    assert (span.attributes or {}).get("error.type") == "TypeError"


def test_suppress_instrumentation_is_honoured(client: openai.OpenAI, captured: Any) -> None:
    with suppress_instrumentation():
        client.responses.create(model=MODEL, input="hi")
        client.conversations.create()
    assert captured.spans() == []
    assert captured.metric_points("gen_ai.client.operation.duration") == []
    client.responses.create(model=MODEL, input="hi")
    assert len(captured.spans()) == 1


# -- a span that fails to start ----------------------------------------------------------------------------------


class RaisingOnStart(SpanProcessor):
    def __init__(self) -> None:
        self.raising = False

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if self.raising:
            raise RuntimeError("a span processor failed")


def test_a_span_that_fails_to_start_releases_the_in_flight_record(emulator: Emulator, client: openai.OpenAI) -> None:
    cap = new_captured()
    processor = RaisingOnStart()
    cap.tracer_provider.add_span_processor(processor)
    instrumentor = ResponsesInstrumentor()
    instrumentor.instrument(tracer_provider=cap.tracer_provider, meter_provider=cap.meter_provider)
    try:
        first = client.responses.create(model=MODEL, input="Remember: the marker is Q-7.")
        processor.raising = True
        assert client.responses.create(model=MODEL, input="and?", previous_response_id=first.id).status == "completed"
        processor.raising = False
        cap.clear()
        client.responses.create(model=MODEL, input="the marker?", previous_response_id=first.id)
    finally:
        instrumentor.uninstrument()
    (attrs,) = chat_attrs(cap)
    assert attrs["openai_responses.signals"] == ()


# -- the SDK's variants -----------------------------------------------------------------------------------------------


def test_with_raw_response_returns_what_it_returns_bare(emulator: Emulator, captured: Captured) -> None:
    raw = emulator.client().responses.with_raw_response.create(model=MODEL, input="Remember this: the marker is R-1.")
    instrumented_type = type(raw)
    parsed = raw.parse()
    assert raw.parse() is parsed  # the instrumentation's parse did not change the app's
    span = captured.only_span()
    assert (span.attributes or {})["gen_ai.response.id"] == parsed.id
    assert (span.attributes or {})["openai_responses.request_id"] == raw.request_id
    ResponsesInstrumentor().uninstrument()
    try:
        bare = emulator.client().responses.with_raw_response.create(
            model=MODEL, input="Remember this: the marker is R-1."
        )
        assert type(bare) is instrumented_type
        bare_parsed = bare.parse()
        assert type(bare_parsed) is type(parsed)
        assert bare_parsed.output_text == parsed.output_text
        assert bare.status_code == raw.status_code == 200
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )


def test_with_streaming_response_body_left_for_the_app(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    with client.responses.with_streaming_response.create(model=MODEL, input="Remember this: the marker is W-1.") as raw:
        span = captured.only_span()  # ended when the headers arrived; the body is the app's to read
        parsed = raw.parse()
        assert parsed.output_text == "Noted marker W-1."
    assert (span.attributes or {})["openai_responses.request_id"] == raw.request_id
    assert (span.attributes or {})["openai_responses.state.mode"] == "single_turn"
    assert "gen_ai.response.id" not in (span.attributes or {})


def test_raw_parse_variant(emulator: Emulator, captured: Captured) -> None:
    raw = emulator.client().responses.with_raw_response.parse(model=MODEL, input="hi")
    parsed = raw.parse()
    assert (captured.only_span().attributes or {})["gen_ai.response.id"] == parsed.id


def test_streaming_call_still_works_and_yields_the_same_events(emulator: Emulator, captured: Captured) -> None:
    def event_types() -> list[str]:
        stream = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is S-1.", stream=True)
        return [event.type for event in stream]

    instrumented = event_types()
    ResponsesInstrumentor().uninstrument()
    try:
        bare = event_types()
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )
    assert instrumented == bare
    assert instrumented[-1] == "response.completed"
    with emulator.client().responses.stream(model=MODEL, input="hi") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Noted."


def test_generator_input_is_not_consumed_by_the_instrumentation(emulator: Emulator, captured: Captured) -> None:
    """The SDK types `input` as Iterable; iterating a generator would steal it from the SDK."""
    first = {"role": "user", "content": "Remember this: the marker is G-1."}
    items = (item for item in [first, {"role": "user", "content": "What is the marker?"}])
    with pytest.raises(TypeError, match="not JSON serializable"):  # what openai 3.x does with a generator
        emulator.client().responses.create(model=MODEL, input=items)  # type: ignore[call-overload]
    assert next(items) is first
    span = captured.only_span()
    assert (span.attributes or {})["error.type"] == "TypeError"
    assert (span.attributes or {})["openai_responses.input.item_count"] == 0


# -- the instrumentation failing inside ------------------------------------------------------------------------------


def test_an_internal_failure_is_swallowed_counted_and_logged_without_payload(
    emulator: Emulator, captured: Captured, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import otel_responses._calls.call as wrappers

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("payload-like text that must not be logged")

    monkeypatch.setattr(wrappers, "run_response_checks", broken)
    with caplog.at_level("DEBUG", logger="otel_responses"):
        response = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is F-1.")
    assert response.output_text == "Noted marker F-1."
    (point,) = captured.metric_points("openai_responses.instrumentation.errors")
    assert point.attributes == {"openai_responses.instrumentation.step": "record_response"}
    assert point.value == 1
    assert "record_response failed (RuntimeError at test_the_app_sees_the_same.py:" in caplog.text
    assert "payload-like" not in caplog.text
    assert captured.only_span().end_time is not None
