"""The app's call reaches the SDK as the app made it, and leaves nothing behind, whatever the instrumentation cannot
read or start: a one-shot input list, extra headers whose ``get`` raises, an argument the SDK rejects (the paginator),
``suppress_instrumentation()``, and a span processor raising when a span starts (the call's in-flight record is
released all the same). Through the real client and the emulator."""

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

from .conftest import new_captured
from .support import chat_attrs

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
