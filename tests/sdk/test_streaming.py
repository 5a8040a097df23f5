"""Streaming: one span per call, ended exactly once however the stream ends, with the same attributes and
signals as a plain call; the app sees the same events."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import openai
import pytest
from opentelemetry.trace import StatusCode

from otel_responses import ResponsesInstrumentor
from otel_responses.emulator import Emulator, EmulatorConfig

from ..conftest import Captured

MODEL = "gpt-4.1-mini"
REASONER = "o4-mini"
PHASED = "gpt-5.4"  # reasoning, and returns `phase`
INCLUDE: Any = ["reasoning.encrypted_content"]


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def assert_completed_stream_span(span: Any, final: Any) -> None:
    a = attrs(span)
    assert a["gen_ai.response.id"] == final.id
    assert a["gen_ai.usage.input_tokens"] == final.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == final.usage.output_tokens
    assert a["openai_responses.output.item_types"] == tuple(item.type for item in final.output)
    assert a["openai_responses.request_id"].startswith("req_")
    assert a["gen_ai.response.time_to_first_chunk"] > 0
    assert a["gen_ai.response.finish_reasons"] == ("stop",)  # completed
    assert a["openai_responses.response.status"] == final.status == "completed"
    assert a["gen_ai.request.stream"] is True
    assert "openai_responses.stream.ended" not in a
    assert span.status.status_code is StatusCode.UNSET


# -- sync -------------------------------------------------------------------------------------------


def test_create_stream_completed(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is S-1.", stream=True)
    events = list(stream)
    assert events[-1].type == "response.completed"
    assert_completed_stream_span(captured.only_span(), events[-1].response)
    ttfc = captured.metric_points("gen_ai.client.operation.time_to_first_chunk")
    assert len(ttfc) == 1
    assert ttfc[0].count == 1


def test_responses_stream_helper_makes_one_span(emulator: Emulator, captured: Captured) -> None:
    with emulator.client().responses.stream(model=MODEL, input="Remember this: the marker is S-2.") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Noted marker S-2."
    assert_completed_stream_span(captured.only_span(), final)


def test_stream_incomplete(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="hello there", max_output_tokens=1, stream=True)
    assert [e.type for e in stream][-1] == "response.incomplete"
    a = attrs(captured.only_span())
    assert a["gen_ai.response.finish_reasons"] == ("length",)  # incomplete: max_output_tokens
    assert a["openai_responses.response.status"] == "incomplete"
    assert a["openai_responses.signals"] == ("response_incomplete",)
    assert a["openai_responses.context_loss"] is True


def test_stream_failed(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="please trigger failure", stream=True)
    assert [e.type for e in stream][-1] == "response.failed"
    span = captured.only_span()
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "server_error"
    assert attrs(span)["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs(span)["openai_responses.response.status"] == "failed"


def test_stream_error_event(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="trigger error event", stream=True)
    events = list(stream)
    assert events[-1].type == "error"
    span = captured.only_span()
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "server_error"
    assert attrs(span)["openai_responses.request_id"].startswith("req_")


def test_stream_api_error_mid_stream(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="trigger stream exception", stream=True)
    seen: list[str] = []

    def consume() -> None:
        seen.extend(event.type for event in stream)

    with pytest.raises(openai.APIError, match="Stream interrupted"):
        consume()
    assert seen == ["response.created", "response.in_progress"]
    span = captured.only_span()
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "APIError"


def test_stream_break_then_close(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="Remember this: the marker is S-3.", stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    assert captured.spans() == []  # still open: the stream is not over
    stream.close()
    a = attrs(captured.only_span())
    assert a["openai_responses.stream.ended"] == "closed"
    assert "gen_ai.response.id" not in a


def test_stream_context_manager_left_early(emulator: Emulator, captured: Captured) -> None:
    with emulator.client().responses.create(model=MODEL, input="hi", stream=True) as stream:
        next(iter(stream))
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "closed"


def test_stream_helper_left_early(emulator: Emulator, captured: Captured) -> None:
    with emulator.client().responses.stream(model=MODEL, input="Remember this: the marker is S-4.") as stream:
        for event in stream:
            if event.type == "response.output_item.added":
                break
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "closed"


def test_abandoned_stream_ends_on_garbage_collection(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="hi", stream=True)
    next(iter(stream))
    del stream
    gc.collect()
    assert attrs(captured.only_span())["openai_responses.stream.ended"] == "abandoned"


def test_streamed_replay_carries_the_same_signals_as_a_plain_one(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()

    def session(stream: bool) -> tuple[str, ...]:
        history: list[Any] = [{"role": "user", "content": "Remember this: the marker is R-1. Now choose a code word."}]
        first = client.responses.create(model=PHASED, input=history, store=False, include=INCLUDE)
        history += [{"role": "assistant", "content": first.output_text}, {"role": "user", "content": "Code word?"}]
        every: Any = {"context": "all_turns"}  # the earlier turn's reasoning would have been read
        if stream:
            events = list(
                client.responses.create(
                    model=PHASED, input=history, store=False, include=INCLUDE, stream=True, reasoning=every
                )
            )
            assert events[-1].type == "response.completed"
        else:
            client.responses.create(model=PHASED, input=history, store=False, include=INCLUDE, reasoning=every)
        return tuple(attrs(captured.spans()[-1])["openai_responses.signals"])

    plain, streamed = session(False), session(True)
    assert plain == streamed == ("reasoning_dropped", "phase_dropped")


def test_streamed_output_items_feed_the_ledger(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    stream = client.responses.create(model=REASONER, input="hi", store=False, stream=True)
    events: list[Any] = list(stream)
    final = events[-1].response
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=REASONER, input="again", previous_response_id=final.id)
    first, second = captured.spans()
    assert attrs(first)["openai_responses.signals"] == ("reasoning_not_replayable",)
    assert attrs(second)["openai_responses.signals"] == ("unstored_parent",)


def test_retrieve_stream_resume_is_one_fetch_span(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    created = client.responses.create(model=MODEL, input="Remember this: the marker is S-5.")
    captured.exporter.clear()
    events = list(client.responses.retrieve(created.id, stream=True))
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Noted marker S-5."
    span = captured.only_span()
    assert span.name == "fetch_response"
    assert attrs(span)["gen_ai.response.id"] == created.id


# -- async ------------------------------------------------------------------------------------------


def test_async_stream_endings(emulator: Emulator, captured: Captured) -> None:
    async def main() -> None:
        client = emulator.async_client()
        stream = await client.responses.create(model=MODEL, input="Remember this: the marker is A-1.", stream=True)
        events = [event async for event in stream]
        assert events[-1].type == "response.completed"

        stream = await client.responses.create(model=MODEL, input="hello there", max_output_tokens=1, stream=True)
        assert [event.type async for event in stream][-1] == "response.incomplete"

        stream = await client.responses.create(model=MODEL, input="trigger error event", stream=True)
        assert [event.type async for event in stream][-1] == "error"

        stream = await client.responses.create(model=MODEL, input="trigger stream exception", stream=True)
        with pytest.raises(openai.APIError):
            async for _ in stream:
                pass

        stream = await client.responses.create(model=MODEL, input="hi", stream=True)
        async for _ in stream:
            break
        await stream.close()

        async with await client.responses.create(model=MODEL, input="hi", stream=True) as stream:
            await stream.__anext__()

        async with client.responses.stream(model=MODEL, input="Remember this: the marker is A-2.") as helper:
            final = await helper.get_final_response()
        assert final.output_text == "Noted marker A-2."

        async with client.responses.stream(model=MODEL, input="hi") as helper:
            async for event in helper:
                if event.type == "response.output_item.added":
                    break
        await client.close()

    asyncio.run(main())
    spans = captured.spans()
    assert len(spans) == 8
    outcome = [
        attrs(s).get("openai_responses.stream.ended")
        or attrs(s).get("error.type")
        or attrs(s)["gen_ai.response.id"][:5]
        for s in spans
    ]
    assert outcome == ["resp_", "resp_", "server_error", "APIError", "closed", "closed", "resp_", "closed"]
    assert attrs(spans[1])["openai_responses.signals"] == ("response_incomplete",)
    assert attrs(spans[6])["gen_ai.response.time_to_first_chunk"] > 0


# -- the app sees the same thing --------------------------------------------------------------------


def scripted_session(client: openai.OpenAI) -> list[Any]:
    """Streams, plain calls and errors; returns everything the app observed, as plain data."""
    observed: list[Any] = []
    stream = client.responses.create(
        model=REASONER, input="Remember this: the marker is D-1.", stream=True, include=INCLUDE, store=False
    )
    events: Any = list(stream)
    observed.append([e.model_dump() for e in events])
    history: list[Any] = [{"role": "user", "content": "Remember this: the marker is D-1."}, *events[-1].response.output]
    history.append({"role": "user", "content": "What is the marker?"})
    with client.responses.stream(model=REASONER, input=history, include=INCLUDE, store=False) as helper:
        observed.append([e.model_dump(warnings=False) for e in helper])
        observed.append(helper.get_final_response().model_dump(warnings=False))
    plain = client.responses.create(model=MODEL, input="hello", max_output_tokens=1)
    observed.append(plain.model_dump())
    for text in ("trigger error event", "trigger stream exception", "please trigger failure"):
        try:
            observed.append([e.model_dump() for e in client.responses.create(model=MODEL, input=text, stream=True)])
        except openai.APIError as error:
            observed.append((type(error).__name__, str(error), error.body))
    try:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_missing")
    except openai.APIStatusError as error:
        observed.append((type(error).__name__, error.status_code, error.body))
    return observed


def test_same_session_with_and_without_instrumentation_is_identical(captured: Captured) -> None:
    config = EmulatorConfig(secret=b"k" * 32)
    with Emulator(config) as emulator:
        instrumented = scripted_session(emulator.client())
    assert len(captured.spans()) == 7
    ResponsesInstrumentor().uninstrument()
    try:
        with Emulator(config) as emulator:
            bare = scripted_session(emulator.client())
    finally:
        ResponsesInstrumentor().instrument(
            tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider
        )

    def strip_times(value: Any) -> Any:
        """Without times, and each opaque payload by its length: the API (and the emulator) encrypts afresh
        on every serialisation."""
        if isinstance(value, dict):
            return {
                k: len(v) if k == "encrypted_content" and isinstance(v, str) else strip_times(v)
                for k, v in value.items()
                if k not in ("created_at", "completed_at")
            }
        if isinstance(value, list):
            return [strip_times(v) for v in value]
        return value

    assert strip_times(instrumented) == strip_times(bare)


def test_stream_events_are_the_same_objects(emulator: Emulator, captured: Captured) -> None:
    stream = emulator.client().responses.create(model=MODEL, input="hi", stream=True)
    assert isinstance(stream, openai.Stream)
    iterator = iter(stream)
    first = next(iterator)
    assert first.type == "response.created"
    rest = list(iterator)
    assert rest[-1].type == "response.completed"
    assert rest[-1].response is rest[-1].response  # the SDK's own object, passed through untouched
    assert (captured.only_span().attributes or {})["gen_ai.response.id"] == rest[-1].response.id


def test_a_stream_read_by_next_then_by_a_loop_is_observed_once(emulator: Emulator, captured: Captured) -> None:
    """A ``for`` loop reads the proxy through a generator, ``next()`` through ``__next__``: mixed, the app gets every
    event once, in order, and the span sees the stream to its end, once."""
    client = emulator.client()
    whole = [event.type for event in client.responses.create(model=MODEL, input="hello", stream=True)]
    captured.exporter.clear()
    stream = client.responses.create(model=MODEL, input="hello", stream=True)
    first = [next(stream).type, next(stream).type]
    rest = [event.type for event in stream]
    assert first + rest == whole
    assert whole[-1] == "response.completed"
    span = captured.only_span()
    assert attrs(span)["gen_ai.response.id"].startswith("resp_")
    assert attrs(span)["gen_ai.response.time_to_first_chunk"] > 0
    assert "openai_responses.stream.ended" not in attrs(span)
    with pytest.raises(StopIteration):
        next(stream)


def test_a_loop_left_early_ends_the_span_when_the_stream_is_dropped(emulator: Emulator, captured: Captured) -> None:
    client = emulator.client()
    stream = client.responses.create(model=MODEL, input="hello", stream=True)
    for _ in stream:
        break
    assert not captured.spans()
    del stream, _
    gc.collect()
    span = captured.only_span()
    assert attrs(span)["openai_responses.stream.ended"] == "abandoned"


def test_a_loop_over_a_stream_nobody_else_holds_sees_it_to_its_end(emulator: Emulator, captured: Captured) -> None:
    """``for event in create(stream=True)`` keeps only the loop's iterator: the proxy must live as long as it, or
    the span would end as abandoned before the first event."""
    client = emulator.client()
    types = [event.type for event in client.responses.create(model=MODEL, input="hello", stream=True)]
    assert types[-1] == "response.completed"
    span = captured.only_span()
    assert "openai_responses.stream.ended" not in attrs(span)
    assert attrs(span)["gen_ai.response.id"].startswith("resp_")
